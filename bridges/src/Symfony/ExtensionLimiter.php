<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony;

use RateLimit\Decision;
use Symfony\Component\RateLimiter\Exception\MaxWaitDurationExceededException;
use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\Policy\SlidingWindow;
use Symfony\Component\RateLimiter\Policy\SlidingWindowLimiter;
use Symfony\Component\RateLimiter\Policy\Window;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\RateLimiter\Reservation;

/**
 * Symfony's LimiterInterface on the extension: every decision (consume, reserve) is one atomic
 * step of the extension's store, shared by every PHP process of the host (or every host of a
 * Redis site), under the extension's `$policy` of the same name as Symfony's, but for
 * `token_bucket`, which is the extension's `stepped_bucket`: `amount` tokens at each whole
 * `interval`, as Symfony's bucket refills.
 *
 * What Symfony's limiters report around the decision (the RateLimit's instants in whole
 * seconds, consume(0) accepted, the version's differences) is reproduced here so code written
 * for them reads the same values; see docs/frameworks.md for what still differs.
 *
 * Made by ExtensionLimiterFactory::create(); `$subject` is the factory's key, `$scope` names the
 * limiter (its `id`).
 */
final class ExtensionLimiter implements LimiterInterface
{
    /** @var list<string> leases taken by consume() and not yet released by release() */
    private array $leases = [];

    /**
     * @param string $scope    the extension's scope (1 .. 64 characters of [A-Za-z0-9_.:-])
     * @param string $subject  the key, 1 .. 1024 bytes (see RateLimit\Bridge\Key::subject())
     * @param string $policy   "token_bucket", "fixed_window" or "sliding_window"
     * @param int    $limit    a token bucket's burst, a window's size
     * @param float  $per      the extension's `$per`: a token bucket's `interval` (the period of its
     *                          steps), a window's length
     * @param int    $inflight most live leases per subject (0: none); see release()
     * @param int    $interval a token bucket's refill interval in seconds (a window's: its length)
     * @param int    $amount   tokens a token bucket gets back every `$interval` (windows: `$limit`)
     */
    public function __construct(
        private readonly string $scope,
        private readonly string $subject,
        private readonly int $limit,
        private readonly float $per,
        private readonly int $inflight = 0,
        private readonly string $policy = 'token_bucket',
        private readonly int $interval = 0,
        private readonly int $amount = 0,
    ) {
    }

    /**
     * Takes `$tokens` now against the future (ratelimit_reserve()): a Reservation whose
     * getWaitDuration() is the exact time until the booked tokens are earned; the caller waits
     * it out (Reservation::wait()) before acting. Two callers never book the same future tokens.
     *
     * @throws MaxWaitDurationExceededException the wait would exceed `$maxTime`, or the store stayed
     *                                          busy (a wait of a second): nothing booked
     * @throws ReserveNotSupportedException     sliding_window before Symfony 6.4, as its own limiter;
     *                                          any policy while the extension has no ratelimit_reserve()
     * @throws \InvalidArgumentException        `$tokens` larger than the limit
     */
    public function reserve(int $tokens = 1, ?float $maxTime = null): Reservation
    {
        if ($this->policy === 'sliding_window' && !self::modernSymfony()) {
            throw new ReserveNotSupportedException(SlidingWindowLimiter::class);
        }
        $this->checkTokens($tokens, true);
        if ($tokens === 0) {
            $now = microtime(true);
            return new Reservation($now, $this->peekLimit($this->peek(), $now));
        }
        if (!\function_exists('ratelimit_reserve')) {
            throw new ReserveNotSupportedException(__CLASS__);
        }
        $now = microtime(true);
        $decision = ratelimit_reserve(
            $this->subject,
            $maxTime ?? \INF,
            limit: $this->limit,
            per: $this->per,
            scope: $this->scope,
            cost: $tokens,
            policy: $this->extensionPolicy(),
            amount: $this->extensionAmount(),
        );
        if (!$decision->allowed) {
            $wait = $this->reportedWait($decision, $tokens);
            throw new MaxWaitDurationExceededException(
                sprintf(
                    'The rate limiter wait time ("%d" seconds) is longer than the provided maximum time'
                    . ' ("%d" seconds).',
                    $wait,
                    $maxTime ?? 0,
                ),
                new RateLimit($decision->remaining, self::instant($now + $wait, false), false, $this->limit),
            );
        }
        $wait = (float) $decision->waitFor;
        return new Reservation(
            $now + $wait,
            new RateLimit($decision->remaining, self::instant($now + $wait, $wait <= 0.0), $wait <= 0.0, $this->limit),
        );
    }

    /**
     * Takes `$tokens` tokens if they are there now; a denial takes nothing. consume(0) takes
     * nothing and is accepted, reporting the tokens left (as every Symfony version does).
     *
     * getRetryAfter() is in whole seconds as Symfony reports it: now when accepted; when denied,
     * a token bucket's `interval` times the refills still needed (Symfony's arithmetic), a
     * window's exact instant from the extension, rounded down to the second. When the store
     * stayed busy for ratelimit.busy_timeout_ms the answer is a denial with a retry a second
     * later (never a permission, unless the operator set ratelimit.fail_open=1).
     *
     * @throws \InvalidArgumentException $tokens negative or larger than the limit (as Symfony)
     */
    public function consume(int $tokens = 1): RateLimit
    {
        $now = microtime(true);
        if ($tokens === 0) {
            $this->checkTokens($tokens, false);
            $peek = $this->peek();
            if ($this->policy === 'token_bucket' && $peek->reserved > 0) {
                // The bucket owes tokens booked by reserve(): Symfony's consume(0) is then a
                // denial, its remaining the (negative) tokens, its retry when they are earned.
                $wait = $this->interval * ceil($peek->reserved / $this->amount);
                return new RateLimit(-$peek->reserved, self::instant($now + $wait, false), false, $this->limit);
            }
            return $this->peekLimit($peek, $now);
        }
        if ($tokens > $this->limit && $this->policy === 'sliding_window' && !self::modernSymfony()) {
            // Symfony 5.4's sliding window does not check the size: such a call is a denial.
            $peek = $this->peek();
            return new RateLimit($peek->remaining, self::instant($now + $this->per, false), false, $this->limit);
        }
        $decision = $this->decide($tokens);
        if (!$decision->allowed) {
            $at = $now + $this->reportedWait($decision, $tokens);
        } elseif ($decision->remaining === 0 && self::roundsUp()) {
            // Symfony 6.4.50 and later: a call that took the last token says when the next comes.
            $at = $now + $this->nextTokenWait($this->peek());
        } else {
            $at = $now;
        }
        $retryAfter = self::instant($at, $at === $now);
        return new RateLimit($decision->remaining, $retryAfter, $decision->allowed, $this->limit);
    }

    /**
     * What consume() asks the extension, as the extension's own Decision (reason "ok", "rate",
     * "inflight" or "unavailable", an exact `retryAfter`, headers() for the IETF RateLimit
     * fields, the lease). decide(0) is a peek.
     *
     * @throws \InvalidArgumentException $tokens negative or larger than the limit
     */
    public function decide(int $tokens = 1): Decision
    {
        $this->checkTokens($tokens, false);
        if ($tokens === 0) {
            return $this->peek();
        }
        $decision = ratelimit_acquire(
            $this->subject,
            limit: $this->limit,
            per: $this->per,
            inflight: $this->inflight,
            scope: $this->scope,
            cost: $tokens,
            policy: $this->extensionPolicy(),
            amount: $this->extensionAmount(),
        );
        if ($decision->lease !== null) {
            $this->leases[] = $decision->lease;
        }
        return $decision;
    }

    /**
     * Forgets this subject's bucket (full again) and its leases.
     */
    public function reset(): void
    {
        ratelimit_reset($this->subject, $this->scope);
        $this->leases = [];
    }

    /**
     * With `inflight` set, every accepted consume() holds one of `inflight` slots of this
     * subject until release(), the end of the request, or ratelimit.lease_ttl, whichever comes
     * first. Symfony has no such notion; this ends the slots taken through this object.
     *
     * @return int how many live slots this call freed
     */
    public function release(): int
    {
        $freed = 0;
        foreach ($this->leases as $lease) {
            $freed += ratelimit_release($lease) ? 1 : 0;
        }
        $this->leases = [];
        return $freed;
    }

    public function getLimit(): int
    {
        return $this->limit;
    }

    /** The extension's `$per`: a token bucket's `interval`, or a window's length. */
    public function getPer(): float
    {
        return $this->per;
    }

    public function getScope(): string
    {
        return $this->scope;
    }

    public function getPolicy(): string
    {
        return $this->policy;
    }

    private function peek(): Decision
    {
        return ratelimit_peek(
            $this->subject,
            limit: $this->limit,
            per: $this->per,
            scope: $this->scope,
            policy: $this->extensionPolicy(),
            amount: $this->extensionAmount(),
        );
    }

    /**
     * The extension's policy: Symfony's token bucket refills `amount` tokens at each whole
     * `interval` (the extension's `stepped_bucket`), not continuously (its `token_bucket`).
     */
    private function extensionPolicy(): string
    {
        return $this->policy === 'token_bucket' ? 'stepped_bucket' : $this->policy;
    }

    /** The extension's `$amount`: a token bucket's tokens per `interval`; null for a window. */
    private function extensionAmount(): ?int
    {
        return $this->policy === 'token_bucket' ? $this->amount : null;
    }

    /**
     * consume(0)/reserve(0): accepted, the tokens left; the instant as the Symfony version in
     * use reports it (5.4: now; 6.4 and 7.x: when none is left, when one comes back).
     */
    private function peekLimit(Decision $peek, float $now): RateLimit
    {
        $at = $now;
        if ($peek->remaining === 0 && self::modernSymfony()) {
            $at += $this->nextTokenWait($peek);
        }
        return new RateLimit($peek->remaining, self::instant($at, $peek->remaining > 0), true, $this->limit);
    }

    /** Seconds until one more token, as Symfony computes it, from a peek that found none. */
    private function nextTokenWait(Decision $peek): float
    {
        return match ($this->policy) {
            'token_bucket' => (float) ($this->interval * ceil(1 / $this->amount)),
            // the window's end: before 6.4.50, now plus the whole seconds to it (rounded down after)
            'fixed_window' => self::roundsUp() ? (float) $peek->retryAfter : ceil((float) $peek->retryAfter),
            default => (float) $peek->retryAfter,
        };
    }

    /**
     * The wait Symfony reports for a denial of `$tokens`: a token bucket's refill `interval`
     * times the refills the missing tokens need, counting those booked ahead (Symfony's
     * arithmetic: never before the tokens are back, as the extension refills at the same rate),
     * a fixed window's end in whole seconds, a sliding window's exact instant. "unavailable":
     * a second.
     */
    private function reportedWait(Decision $decision, int $tokens): float
    {
        if ($decision->reason !== 'rate') {
            return max(1.0, (float) $decision->retryAfter);
        }
        // The tokens missing: those asked for beyond what is left, and those booked ahead.
        $missing = max(1, $tokens - $decision->remaining + $decision->reserved);
        return match ($this->policy) {
            'token_bucket' => (float) ($this->interval * ceil($missing / $this->amount)),
            'fixed_window' => self::roundsUp() ? (float) $decision->retryAfter : ceil((float) $decision->retryAfter),
            default => (float) $decision->retryAfter,
        };
    }

    private function checkTokens(int $tokens, bool $reserving): void
    {
        if ($tokens < 0) {
            throw new \InvalidArgumentException(sprintf('Cannot consume a negative number of tokens (%d).', $tokens));
        }
        if ($tokens > $this->limit && ($reserving || $this->policy !== 'sliding_window' || self::modernSymfony())) {
            throw new \InvalidArgumentException(sprintf(
                $this->policy === 'token_bucket'
                    ? 'Cannot reserve more tokens (%d) than the burst size of the rate limiter (%d).'
                    : 'Cannot reserve more tokens (%d) than the size of the rate limiter (%d).',
                $tokens,
                $this->limit,
            ));
        }
    }

    /**
     * Symfony 6.4 and later (sliding windows reserve; consume(0) reports when a token comes
     * back); the bridge is tested on 5.4, 6.4 and 7.1.
     */
    private static function modernSymfony(): bool
    {
        static $modern = null;
        return $modern ??= method_exists(SlidingWindow::class, 'calculateTimeForTokens');
    }

    /**
     * Symfony 6.4.50 and later (as Debian 13 packages it) round a future instant up to the
     * second and say when the next token comes after a call that took the last one; earlier
     * releases round down.
     */
    private static function roundsUp(): bool
    {
        static $up = null;
        return $up ??= method_exists(Window::class, 'configure');
    }

    /**
     * An instant in whole seconds, as Symfony's limiters make them: now rounded down; a future
     * one rounded up where the installed Symfony does so, else down.
     */
    private static function instant(float $unixTime, bool $now): \DateTimeImmutable
    {
        $second = !$now && self::roundsUp() ? ceil($unixTime) : floor($unixTime);
        return \DateTimeImmutable::createFromFormat('U', (string) (int) $second)
            ?: throw new \LogicException(sprintf('Unrepresentable instant %F.', $unixTime));
    }
}
