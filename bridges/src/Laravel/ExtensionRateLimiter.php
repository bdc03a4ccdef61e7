<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

use Closure;
use Illuminate\Cache\RateLimiter;
use RateLimit\Bridge\Key;
use RateLimit\Decision;

/**
 * Laravel's RateLimiter (8.83, 10, 11, 12) with its counters kept by the extension instead of a
 * cache: shared by every PHP process of the host, each change one atomic step of the store.
 * Bound in the container by RateLimitServiceProvider, so the `throttle:` middleware, the
 * `RateLimiter` facade and queue job middleware use it unchanged.
 *
 * Stock Laravel keeps two cache entries per key: the counter (`key`, which expires `decay`
 * seconds after the hit that created it) and the timer (`key:timer`, the instant that window
 * ends, which `availableIn()` reads). Here each is an extension bucket of policy
 * `fixed_window` (a window starts at its first hit and lasts `per` seconds):
 * - the counter: the key's bucket in `$scope`; a hit is a take of a bucket of 10^12 tokens,
 *   so it is never refused and counts past any limit (stock `hit()` returns 6, 7, 8 past a
 *   limit of 5), and `attempts` is what the window has used;
 * - the timer: the key's bucket in `$scope:timer`, started by a hit when none is running
 *   (all `decay` tokens of a window of `decay` seconds taken): it gives the window's end
 *   (`availableIn()`) and the decay itself to a call that is not told it, as
 *   `attempts($key)` and `availableIn($key)` in a fresh request are not (so they answer
 *   from the stored state, not from defaults).
 * Each window lasts the decay of the hit that started it: the store keeps a fixed window's
 * length with it, so a key hit with another decay counts in the running window until that
 * window's own end, then starts one of the new decay, as stock's cache entries expire with the
 * lifetime they were created with.
 * A fixed window's state (tokens used, start, length) does not depend on the limit it is read with,
 * so one bucket serves both a count (limit 10^12) and an exact admission (`attempt()` takes
 * with limit `maxAttempts`: never more than `maxAttempts` callbacks per window, however many
 * workers race).
 *
 * `attempt()` takes its token before running the callback (stock: after), so that concurrent
 * workers cannot run more callbacks than `maxAttempts`; a callback that throws gets it back
 * (ratelimit_refund(), and the timer the call started when no other attempt counts beside it),
 * as stock, which never charged it, while its window runs: one that throws after its window
 * ended keeps it (a refund would lower the next window's count).
 * `decrement()` and `increment()` with an amount below 1 give attempts back the same way, in
 * one atomic step, never below 0 (stock's count goes negative: -1 after a decrement of a
 * fresh key, where the bridge answers 0).
 *
 * One difference because the bridge is exact: when this key's last `tooManyAttempts()` in this object
 * answered false (the throttle middleware and login throttling check, then hit) and the hit
 * finds the count past that limit (another worker took the last attempt in between), `hit()`
 * throws the middleware's own ThrottleRequestsException (429, stock headers), so "check, then
 * hit" admits exactly `maxAttempts`. Times are whole seconds rounded up (`availableIn()`): the
 * same as stock when the window started on a whole second, at most one more otherwise.
 */
class ExtensionRateLimiter extends RateLimiter
{
    /** Bucket size of a pure count: a take never refused. */
    private const COUNT = 1_000_000_000_000;

    /** Window read for its state alone (10^9 s: no window has ended in it). */
    private const FOREVER = 1_000_000_000.0;

    /** The shortest period (1 ms). */
    private const SHORTEST = 0.001;

    /**
     * Seconds to spare between this host's monotonic clock and the store's when telling whether
     * a window is still running (the store's clock may run a little ahead of ours).
     */
    private const SPARE = 0.1;

    private const POLICY = 'fixed_window';

    /** @var array<string, int> key => maxAttempts of its last tooManyAttempts() that answered false */
    private array $cleared = [];

    /** @var array<string, int> key => decay seconds this object was told or read */
    private array $decays = [];

    private readonly string $timerScope;

    /**
     * @param string $scope    the extension's scope of every key of this limiter (its timers
     *                         are in `$scope:timer`)
     * @param int    $inflight most live leases per key taken by hit() and attempt() (0: none);
     *                         a hit's lease ends with the request (under Octane: with the HTTP
     *                         request, see RateLimitServiceProvider::boot(); in another
     *                         long-running CLI process: at ratelimit.lease_ttl, or
     *                         ratelimit_end_request()), attempt()'s when its callback returns
     */
    public function __construct(
        private readonly string $scope = 'laravel',
        private readonly int $inflight = 0,
    ) {
        // No cache: parent::__construct() is not called and $this->cache stays unset.
        $this->timerScope = $scope . ':timer';
        if (preg_match('/^[A-Za-z0-9_.:-]{1,58}$/D', $scope) !== 1) {
            throw new \InvalidArgumentException('The scope must be 1 to 58 characters of [A-Za-z0-9_.:-].');
        }
    }

    /**
     * Runs `$callback` if this window has used fewer than `$maxAttempts`, taking the attempt
     * first in one atomic step (see the class comment).
     *
     * @param string $key
     * @param int    $maxAttempts
     * @param \DateTimeInterface|\DateInterval|int $decaySeconds
     * @return mixed the callback's result (null as true; Laravel 8: any falsy result as true),
     *               false when limited
     */
    public function attempt($key, $maxAttempts, Closure $callback, $decaySeconds = 60)
    {
        $k = $this->clean($key);
        unset($this->cleared[$k]);
        $decay = $this->seconds($decaySeconds, $k);
        if ($decay === null) {
            // A decay of 0 or less and no window counting: stock counts nothing, runs the callback.
            return self::result($callback());
        }
        $this->decays[$k] = $decay;
        // Before the timer and the take: their windows end no earlier than this plus their length.
        $begun = hrtime(true);
        // The timer first, as stock's hit() adds it: a count in the store always has its timer
        // running, so no worker takes another's fresh count for a stale one.
        $started = $this->startTimer($k, $decay);
        $decision = $this->take($k, max(1, (int) $maxAttempts), $decay, 1);
        if (!$decision->allowed) {
            if ($decision->reason !== 'rate' || !$this->countOutlivedTimer($k, $decay)) {
                return false;
            }
            // Stock: a full counter without its timer is reset, and the attempt goes ahead.
            $this->resetAttempts($key);
            $decision = $this->take($k, max(1, (int) $maxAttempts), $decay, 1);
            if (!$decision->allowed) {
                return false;
            }
        }
        try {
            $result = $callback();
        } catch (\Throwable $e) {
            // Stock hits only once the callback returned: the attempt is given back (and the
            // timer this call started, if it did), and the exception goes on.
            if (self::took($decision)) {
                $this->giveBackAttempt($k, $decay, $begun, $decision->resetAfter, $started);
            }
            throw $e;
        } finally {
            if ($decision->lease !== null) {
                ratelimit_release($decision);
            }
        }
        return self::result($result);
    }

    /**
     * Whether an admission took from the store a refund goes to: not a shadow scope's would-be
     * denial (`dryRun`), a `fail_open` admission nor one of the local fallback while Redis was
     * unavailable (a refund goes to Redis only), none of which took anything there. Giving back
     * what was not taken would take back an attempt that did count.
     */
    private static function took(Decision $d): bool
    {
        return $d->allowed && !$d->dryRun && $d->source === 'store';
    }

    /** attempt()'s answer for a callback's result, as the running version gives it. */
    private static function result(mixed $result): mixed
    {
        if (self::laravel() < 10) {
            return $result ?: true;
        }
        return $result ?? true;
    }

    /**
     * @param string $key
     * @param int    $maxAttempts
     * @return bool true when this window has used `$maxAttempts` or more (nothing is charged)
     */
    public function tooManyAttempts($key, $maxAttempts)
    {
        $k = $this->clean($key);
        unset($this->cleared[$k]);
        if ($this->attempts($key) >= $maxAttempts) {
            if ($this->timer($k) !== null) {
                return true;
            }
            $this->resetAttempts($key);
        }
        $this->cleared[$k] = (int) $maxAttempts;
        return false;
    }

    /**
     * @param string $key
     * @param \DateTimeInterface|\DateInterval|int $decaySeconds
     * @return int the attempts of this window, this one included
     *
     * @throws \Illuminate\Http\Exceptions\ThrottleRequestsException the count went past the limit
     *         of this key's last tooManyAttempts() in this object, which answered false (its
     *         previous exception is a TooManyAttemptsException); TooManyAttemptsException
     *         itself when illuminate/http is not installed
     */
    public function hit($key, $decaySeconds = 60)
    {
        return $this->increment($key, $decaySeconds);
    }

    /**
     * @param string $key
     * @param \DateTimeInterface|\DateInterval|int $decaySeconds
     * @param int $amount below 1: the count goes down by as much (see decrement())
     * @return int the attempts of this window, these included
     */
    public function increment($key, $decaySeconds = 60, $amount = 1)
    {
        $amount = (int) $amount;
        $k = $this->clean($key);
        $max = $this->cleared[$k] ?? null;
        unset($this->cleared[$k]);
        $decay = $this->seconds($decaySeconds, $k);
        if ($decay === null) {
            // A decay of 0 or less and no window counting: stock's cache stores nothing.
            return $amount;
        }
        $this->decays[$k] = $decay;
        // The timer before the count, as stock (see attempt()).
        $this->startTimer($k, $decay);
        if ($amount < 1) {
            // Given back in one step of the store; the count never goes below 0 (stock's does).
            $this->giveBack($k, $decay, -$amount);
            return $this->attempts($key);
        }
        $decision = $this->take($k, self::COUNT, $decay, $amount);
        if (!$decision->allowed) {
            // Only an in-flight limit (the `inflight` option) or an unavailable store refuses.
            throw TooManyAttemptsException::throwable($max, $this->waitOf($decision));
        }
        $hits = self::COUNT - $decision->remaining;
        // Past the limit before this increment: another worker took the last attempt since the
        // check (the caller's own amount going past it is stock's answer, the count).
        if ($max !== null && $hits - $amount >= $max) {
            throw TooManyAttemptsException::throwable($max, $this->availableIn($key));
        }
        return $hits;
    }

    /**
     * Lowers this window's count by `$amount` in one atomic step of the store
     * (ratelimit_refund()), never below 0; starts the key's timer when none runs, as stock.
     *
     * @param string $key
     * @param \DateTimeInterface|\DateInterval|int $decaySeconds
     * @param int $amount
     * @return int the attempts of this window after it (read after the step: another worker's
     *             hit in between is counted in it)
     */
    public function decrement($key, $decaySeconds = 60, $amount = 1)
    {
        return $this->increment($key, $decaySeconds, ((int) $amount) * -1);
    }

    /**
     * @param string $key
     * @return int the attempts of this window (0 when it has ended)
     */
    public function attempts($key)
    {
        $k = $this->clean($key);
        // A window keeps its own length (see the class comment): read over any period, a running
        // one counts until its own end. The key's decay when known, for a count written by a
        // build that kept no length; else the shortest period, which ends such a count.
        $per = (float) ($this->decayOf($k) ?? self::SHORTEST);
        return self::COUNT - $this->peek($k, self::COUNT, $per, $this->scope)->remaining;
    }

    /**
     * @param string $key
     * @return bool true when there was a count to forget (its timer stays, as stock's); false
     *              when its window has ended, as stock's expired cache entry
     */
    public function resetAttempts($key)
    {
        $k = $this->clean($key);
        unset($this->cleared[$k]);
        // The store keeps an ended window's row (ratelimit_reset() answers true for it), and a
        // count given back to 0 is a row too: stock forgets an entry holding 0 (true) while its
        // window, which the timer's is, runs.
        $had = $this->attempts($key) > 0;
        $forgot = ratelimit_reset(Key::subject($k), $this->scope);
        return $had || ($forgot && $this->timer($k) !== null);
    }

    /**
     * @param string $key
     * @param int    $maxAttempts
     * @return int `$maxAttempts` - attempts, as the running version computes it (stock's own
     *             method, reading attempts() from here: negative past the limit up to Laravel 11,
     *             at least 0 from 12; its key cleaned twice, as stock's)
     */
    public function remaining($key, $maxAttempts)
    {
        return parent::remaining($key, $maxAttempts);
    }

    /**
     * @param string $key
     * @param int    $maxAttempts
     * @return int as remaining()
     */
    public function retriesLeft($key, $maxAttempts)
    {
        return $this->remaining($key, $maxAttempts);
    }

    /**
     * Forgets the count and the timer.
     *
     * @param string $key
     * @return void
     */
    public function clear($key)
    {
        $k = $this->clean($key);
        $this->resetAttempts($key);
        ratelimit_reset(Key::subject($k), $this->timerScope);
        unset($this->decays[$k]);
    }

    /**
     * @param string $key
     * @return int whole seconds until the key's window ends, rounded up; 0 when none is running
     */
    public function availableIn($key)
    {
        $timer = $this->timer($this->clean($key));
        return $timer === null ? 0 : (int) ceil($timer[1]);
    }

    /**
     * The extension's own answer for `$key` now against `$maxAttempts`, without taking
     * anything (reason, headers()); null when no window of the key is running.
     */
    public function decision(string $key, int $maxAttempts): ?Decision
    {
        $k = $this->clean($key);
        $decay = $this->decayOf($k);
        if ($decay === null) {
            return null;
        }
        return $this->peek($k, $maxAttempts, (float) $decay, $this->scope);
    }

    /** The Laravel major version of the RateLimiter class loaded (8, 10 or 11 for 11 and later). */
    private static function laravel(): int
    {
        static $version = null;
        return $version ??= match (true) {
            method_exists(RateLimiter::class, 'decrement') => 11,
            method_exists(RateLimiter::class, 'increment') => 10,
            default => 8,
        };
    }

    private function clean(string $key): string
    {
        return $this->cleanRateLimiterKey($key);
    }

    /**
     * The decay in whole seconds. One of 0 or less (a DateTime now or past) is stock's cache entry
     * of no lifetime, never stored: a hit then counts in the key's window counting now (its
     * decay), else nowhere (null).
     *
     * @param \DateTimeInterface|\DateInterval|int $decay
     */
    private function seconds($decay, string $k): ?int
    {
        $seconds = $decay instanceof \DateTimeInterface || $decay instanceof \DateInterval
            ? $this->secondsUntil($decay)
            : (int) $decay;
        if ($seconds >= 1) {
            return $seconds;
        }
        $running = $this->decayOf($k);
        if ($running === null) {
            return null;
        }
        $counting = $this->peek($k, self::COUNT, (float) $running, $this->scope)->remaining < self::COUNT;
        return $counting ? $running : null;
    }

    /**
     * The key's decay: told in this object, else its running timer's; null when it has none.
     */
    private function decayOf(string $k): ?int
    {
        if (isset($this->decays[$k])) {
            return $this->decays[$k];
        }
        $decay = $this->timerDecay($this->peek($k, self::COUNT, self::FOREVER, $this->timerScope));
        return $decay === null ? null : ($this->decays[$k] = $decay);
    }

    /** The decay a timer bucket read over FOREVER holds (its tokens taken); null when none. */
    private function timerDecay(Decision $d): ?int
    {
        $decay = self::COUNT - $d->remaining;
        return $decay < 1 ? null : $decay;
    }

    /**
     * The key's running timer: [its decay, seconds until it ends]; null when none runs.
     *
     * @return array{int, float}|null
     */
    private function timer(string $k): ?array
    {
        $d = $this->peek($k, self::COUNT, self::FOREVER, $this->timerScope);
        $decay = $this->timerDecay($d);
        if ($decay === null) {
            return null;
        }
        // A timer keeps its length, its decay: it ends at its own end whatever it is read over.
        // One written by a build that kept no length ends FOREVER after its start.
        $left = $d->resetAfter > self::FOREVER / 2 ? $d->resetAfter - self::FOREVER + $decay : $d->resetAfter;
        if ($left <= 0.0) {
            return null;
        }
        $this->decays[$k] ??= $decay;
        return [$decay, $left];
    }

    /**
     * Whether the key's full count started before its running timer: stock's stale counter (a
     * count restarted after resetAttempts() that outlived its timer), which stock resets. A
     * count that started with or after the running timer is this window's, never reset.
     */
    private function countOutlivedTimer(string $k, int $decay): bool
    {
        // The count read first: the time between the two reads can only make it look younger
        // (a fresh count is never taken for a stale one).
        $count = $this->peek($k, self::COUNT, (float) $decay, $this->scope);
        $timer = $this->timer($k);
        if ($timer === null) {
            return false;
        }
        // Seconds since each started: its length less the time it has left. The store counts
        // whole ms, the timer's is read over 10^9 s (float noise): earlier by 1 ms or more.
        return ($decay - $count->resetAfter) - ($timer[0] - $timer[1]) > 0.0005;
    }

    /**
     * Stock `cache->add(key:timer)`, atomic: a take of all `decay` tokens of a window of `decay`
     * seconds succeeds only when no timer of the key is running (then it starts one).
     *
     * @return bool true when this call started the timer in the store (not a shadow scope's
     *              would-be denial, a fail_open or a fallback admission)
     */
    private function startTimer(string $k, int $decay): bool
    {
        $d = ratelimit_acquire(
            Key::subject($k),
            limit: $decay,
            per: (float) $decay,
            scope: $this->timerScope,
            cost: $decay,
            policy: self::POLICY,
        );
        // Only a start the store made is one stopTimer() may undo (see took()).
        return self::took($d);
    }

    /** Undoes startTimer()'s start: all `decay` tokens back, the timer's window empty again. */
    private function stopTimer(string $k, int $decay): void
    {
        ratelimit_refund(Key::subject($k), $decay, $decay, (float) $decay, $this->timerScope, self::POLICY);
    }

    /**
     * attempt()'s attempt back, after its callback threw, in the window it was taken in only: a
     * refund lowers the window running when it is made, so one made once the attempt's window
     * has ended would lower the next window's count and run more callbacks there than
     * `maxAttempts`; the attempt then stays counted where it was (nothing left to give back).
     * The timer this call started stops only while no other attempt counts beside it, and only
     * in its own window: a count left without its timer reads as stock's stale counter, which
     * the next attempt that finds it full resets (one callback more in the window).
     *
     * @param int   $begun     hrtime() before the timer and the take: both windows end no earlier
     *                         than this plus their length
     * @param float $resetAfter the take's: seconds from it to its window's end
     */
    private function giveBackAttempt(string $k, int $decay, int $begun, float $resetAfter, bool $started): void
    {
        $gone = (hrtime(true) - $begun) / 1e9 + self::SPARE;
        if ($gone < $resetAfter) {
            $this->giveBack($k, $decay, 1);
        }
        if (!$started || $gone >= $decay) {
            return;
        }
        if ($this->peek($k, self::COUNT, (float) $decay, $this->scope)->remaining === self::COUNT) {
            $this->stopTimer($k, $decay);
        }
    }

    /** `$amount` attempts back to the key's count, in the window running now (ratelimit_refund()). */
    private function giveBack(string $k, int $decay, int $amount): void
    {
        if ($amount >= 1) {
            ratelimit_refund(Key::subject($k), $amount, self::COUNT, (float) $decay, $this->scope, self::POLICY);
        }
    }

    private function peek(string $k, int $limit, float $per, string $scope): Decision
    {
        return ratelimit_peek(Key::subject($k), limit: $limit, per: $per, scope: $scope, policy: self::POLICY);
    }

    private function take(string $k, int $limit, int $decay, int $cost): Decision
    {
        return ratelimit_acquire(
            Key::subject($k),
            limit: $limit,
            per: (float) $decay,
            inflight: $this->inflight,
            scope: $this->scope,
            cost: $cost,
            policy: self::POLICY,
        );
    }

    private function waitOf(Decision $decision): int
    {
        return max(1, (int) ceil($decision->retryAfter));
    }
}
