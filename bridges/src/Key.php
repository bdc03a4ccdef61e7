<?php

declare(strict_types=1);

namespace RateLimit\Bridge;

/**
 * Turns a framework's limiter key and limiter name into the extension's subject and scope.
 *
 * The subject goes to the extension as is (it is stored only as an HMAC pseudonym); this class
 * only keeps it within the extension's bounds. Nothing here writes or logs a key.
 *
 * @internal
 */
final class Key
{
    /** The subject of a limiter created without a key (Symfony's create(null) / create('')). */
    public const GLOBAL_SUBJECT = "\0global";

    /** Longest subject the extension takes (bytes). */
    private const MAX_SUBJECT = 1024;

    private function __construct()
    {
    }

    /**
     * A subject of 1 .. 1024 bytes for the extension: an empty key becomes one fixed subject,
     * a longer key its SHA-256, both prefixed with a NUL byte; a key that itself starts with
     * one (a client can send it) is hashed too, so that no key can spell another's subject.
     */
    public static function subject(?string $key): string
    {
        if ($key === null || $key === '') {
            return self::GLOBAL_SUBJECT;
        }
        if (\strlen($key) > self::MAX_SUBJECT || $key[0] === "\0") {
            return "\0sha256:" . hash('sha256', $key, true);
        }
        return $key;
    }

    /**
     * A scope (1 .. 64 characters of [A-Za-z0-9_.:-]) named after a limiter: the name itself when
     * it is one already, else the name with every other character replaced by "_", cut to 55
     * characters, then "." and 8 hex digits of its SHA-256 (so two names never share a scope).
     */
    public static function scope(string $name): string
    {
        if (preg_match('/^[A-Za-z0-9_.:-]{1,64}$/D', $name) === 1) {
            return $name;
        }
        $clean = substr((string) preg_replace('/[^A-Za-z0-9_.:-]/', '_', $name), 0, 55);
        return ($clean === '' ? 'limiter' : $clean) . '.' . substr(hash('sha256', $name), 0, 8);
    }
}
