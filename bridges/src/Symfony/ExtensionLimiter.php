<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony;

use RateLimit\Decision;
use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\RateLimiter\Reservation;

/**
 * Symfony's LimiterInterface on ratelimit_acquire(): one token bucket of `$limit` tokens,
 * refilled continuously by `$limit` tokens every `$per` seconds, shared by every PHP process of
 * the host through the extension's database. A decision is one atomic step in the extension
 * (no lock, no cache): two workers never both spend the same token.
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
     * @param int    $limit    bucket size: the most tokens one burst can take
     * @param float  $per      seconds to refill `$limit` tokens
     * @param int    $inflight most live leases per subject (0: none); see release()
     */
    public function __construct(
        private readonly string $scope,
        private readonly string $subject,
        private readonly int $limit,
        private readonly float $per,
        private readonly int $inflight = 0,
    ) {
    }

    /**
     * Not supported: a reservation takes tokens that the bucket will only hold in the future,
     * and the extension never lends tokens (a denial takes nothing). Symfony's sliding window
     * refuses reserve() the same way.
     *
     * @throws ReserveNotSupportedException always
     */
    public function reserve(int $tokens = 1, ?float $maxTime = null): Reservation
    {
        throw new ReserveNotSupportedException(__CLASS__);
    }

    /**
     * Takes `$tokens` tokens if the bucket holds them; a denial takes nothing.
     * consume(0) takes nothing and reports the tokens held.
     *
     * The RateLimit's retry-after is exact to the microsecond (now when accepted); when the
     * database stayed busy for ratelimit.busy_timeout_ms the answer is a denial with a retry
     * one second later (never a permission, unless the operator set ratelimit.fail_open=1).
     *
     * @throws \InvalidArgumentException $tokens negative or larger than the limit (as Symfony)
     */
    public function consume(int $tokens = 1): RateLimit
    {
        $now = microtime(true);
        $decision = $this->decide($tokens);
        $retryAt = $decision->allowed ? $now : $now + $decision->retryAfter;
        return new RateLimit($decision->remaining, self::instant($retryAt), $decision->allowed, $this->limit);
    }

    /**
     * What consume() asks the extension, as the extension's own Decision (reason "ok", "rate",
     * "inflight" or "unavailable", headers() for the IETF RateLimit fields, the lease).
     *
     * @throws \InvalidArgumentException $tokens negative or larger than the limit
     */
    public function decide(int $tokens = 1): Decision
    {
        if ($tokens < 0) {
            throw new \InvalidArgumentException(sprintf('Cannot consume a negative number of tokens (%d).', $tokens));
        }
        if ($tokens > $this->limit) {
            throw new \InvalidArgumentException(sprintf(
                'Cannot reserve more tokens (%d) than the burst size of the rate limiter (%d).',
                $tokens,
                $this->limit,
            ));
        }
        if ($tokens === 0) {
            return ratelimit_peek($this->subject, limit: $this->limit, per: $this->per, scope: $this->scope);
        }
        $decision = ratelimit_acquire(
            $this->subject,
            limit: $this->limit,
            per: $this->per,
            inflight: $this->inflight,
            scope: $this->scope,
            cost: $tokens,
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

    /** Seconds to refill the whole bucket (`limit` tokens). */
    public function getPer(): float
    {
        return $this->per;
    }

    public function getScope(): string
    {
        return $this->scope;
    }

    private static function instant(float $unixTime): \DateTimeImmutable
    {
        return \DateTimeImmutable::createFromFormat('U.u', sprintf('%.6F', $unixTime))
            ?: throw new \LogicException(sprintf('Unrepresentable instant %F.', $unixTime));
    }
}
