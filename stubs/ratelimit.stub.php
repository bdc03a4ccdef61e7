<?php

/**
 * IDE stub for the `ratelimit` extension: host-wide rate limits (token buckets and in-flight
 * leases) shared by every PHP process of a host through one SQLite file.
 *
 * Kept by hand. php-tests/stub_matches_reflection.phpt fails when a declaration here (name,
 * parameter names, types, defaults, nullability, return types, class flags, properties) differs
 * from what the loaded extension reports through Reflection.
 *
 * php.ini directives (all PHP_INI_SYSTEM: set them in php.ini, with `php -d`, or with
 * `php_admin_value[...]` in a PHP-FPM pool; `ini_set()` cannot change them). A value that cannot
 * work (unparsable, out of range, a relative path) is a startup warning naming the directive, and
 * every call then throws a RateLimit\Exception naming it until it is fixed; the paths must be
 * absolute.
 *
 * BEGIN GENERATED directives (from src/core/config.rs; RATELIMIT_WRITE_DOCS=1 cargo test --no-default-features --test docs rewrites it)
 * | directive | default | accepts | what it does |
 * |---|---|---|---|
 * | ratelimit.key_file | "" | an absolute path to a file (or empty for the default) | The HMAC key: 32 random bytes or more (`head -c 32 /dev/urandom`), a file of the pool's user readable by it alone (0600 or 0400), outside the web root and apart from the database. Empty: `<db_path>.key`, created 0600 on first use (for development only). Required with `redis`: the same key on every host. Missing, short, weak or not ours: `RateLimit\Exception`. |
 * | ratelimit.key_file_previous | "" | an absolute path to a file (or empty for the default) | During a key rotation only: the replaced key file. A bucket missing under the new key is moved from its name under this one (SQLite; on Redis clients start afresh once). |
 * | ratelimit.key_fingerprint | "" | empty or the key's 16 hex digits (phpinfo's "Key fingerprint") | Optional: the key every host must hold, as the 16 hex digits `phpinfo()` shows under "Key fingerprint". Another key is a `RateLimit\Exception` on that host, before any store is asked. |
 * | ratelimit.limit | "60" | an integer from 1 to 10^12 | Default `$limit`: tokens per bucket. |
 * | ratelimit.per | "60" | seconds from 0.001 to 10^9 | Default `$per`: seconds to refill `$limit` tokens. |
 * | ratelimit.inflight | "0" | an integer from 0 to 1000000 | Default `$inflight`: live leases per subject and scope (0: no lease). |
 * | ratelimit.lease_ttl | "60" | seconds from 0.001 to 31536000 | Seconds after which a lease that was never released expires (its worker was killed, say). |
 * | ratelimit.ipv6_prefix | "64" | an integer from 0 to 128 | IPv6 subjects are cut to this many bits before hashing: a client is limited per /64 by default. |
 * | ratelimit.fail_open | "0" | 0 or 1 (also on/off, yes/no, true/false; empty is 0) | 1: an "unavailable" decision is allowed (without a lease). 0: it is a denial. See failure modes. |
 * | ratelimit.dry_run | "" | empty, * or scopes (1 to 64 characters of [A-Za-z0-9_.:-]) separated by commas | Shadow mode: empty (off), `*` (every scope) or a list of scopes. Their `rate` and `inflight` denials are answered allowed with `dryRun` true (charged as for real: a denial takes nothing, gets no lease, sends no Retry-After), counted as `dry_run_denied`. "unavailable" stays unavailable (only `fail_open` admits it). |
 * | ratelimit.request_ttl | "60" | seconds from 0.001 to 31536000 | Seconds an admission with a `$request_id` is remembered for its retries (with a lease, at least `ratelimit.lease_ttl`). |
 * | ratelimit.request_replays | "3" | an integer from 0 to 1000 | How many times such an admission is replayed (answered again, taking nothing, `$replay` true; 0: never); after that, a retry is charged like any call. |
 * | ratelimit.db_path | "" | an absolute path to a file (or empty for the default) | The SQLite file every worker of the host shares, on a local file system (never NFS). Empty: `php-ratelimit.sqlite` in `<temp dir>/php-ratelimit-<euid>/` (created 0700). With `redis`: the file of the host's breaker (`<db_path>.breaker`) and of the local fallback. |
 * | ratelimit.busy_timeout_ms | "100" | milliseconds from 0 to 60000 | How long a decision waits for the database's write lock before it is "unavailable". |
 * | ratelimit.max_entries | "100000" | an integer from 1 to 10^9 | Most buckets kept: beyond it drained buckets, then the least recently used bucket without a live lease (of a random sample of 64, in a larger table), are dropped (counted as `evicted`). Redis does not use it: idle keys expire. |
 * | ratelimit.backend | "sqlite" | sqlite or redis | Where the buckets live: `sqlite` (one file per host) or `redis` (one Redis or Redis Cluster for every host of a site). |
 * | ratelimit.redis_url | "redis://127.0.0.1:6379/0" | a redis://, rediss:// or unix:// URL | The Redis server: `redis://[user:password@]host:port/db`, `rediss://` for TLS (roots from the system or `SSL_CERT_FILE`), `unix:///path/redis.sock`. Never shown in a warning. |
 * | ratelimit.redis_cluster | "" | empty, or seed nodes separated by commas, each a redis://, rediss:// or unix:// URL | Seed nodes of a Redis Cluster; not empty: cluster mode (`redis_url` unused). |
 * | ratelimit.redis_sentinel | "" | empty, or Sentinels separated by commas, each host:port or a redis:// or rediss:// URL | Sentinels watching the master; not empty: Sentinel mode. The master named `redis_sentinel_master` is asked for from one Sentinel after another within the call's budget, checked with ROLE, and asked for again after a failover (a connection error, a `-READONLY` reply, or every second). `redis_url` then gives only the master's password, database and TLS (`rediss://`); a Sentinel given as host:port uses the same TLS and no password, a URL gives its own. |
 * | ratelimit.redis_sentinel_master | "" | empty, or a master name (1 to 128 characters, no spaces) | The name of the master the Sentinels watch (`sentinel monitor <name> ...`); required with `redis_sentinel`. |
 * | ratelimit.redis_prefix | "rl:" | 1 to 64 printable characters, without spaces or braces | Put before every key, so that several sites can share one Redis. |
 * | ratelimit.redis_timeout_ms | "50" | milliseconds from 1 to 60000 | The most one call waits for Redis, every step together: resolving the host name, connecting, TLS, AUTH and SELECT, asking a Sentinel or reading a Cluster's slot map, writing, and every read; then "unavailable" (or the local fallback). |
 * | ratelimit.redis_fallback | "none" | none or local | While Redis is unavailable: `none` ("unavailable", then `fail_open`) or `local` (decide with this host's SQLite file at `db_path`: the limit becomes per host). |
 * | ratelimit.redis_value_form | "text" | text or binary | The form the scripts write a new bucket's value in (docs/redis.md, "A bucket's stored value"): `text`, which every build reads, or `binary`, some 13% less of the server's work a decision on the scripts' path, which older builds (those without this setting) cannot read: set it once every host of the site runs a build that has it. Every path reads both forms and keeps a bucket in the form it found it. |
 * | ratelimit.redis_allow_eviction | "0" | 0 or 1 (also on/off, yes/no, true/false; empty is 0) | 1: decide also on a Redis whose `maxmemory-policy` evicts keys (every bucket has a time to live, so `volatile-*` policies evict them too: a silently reset limit). 0: such a server is a `RateLimit\Exception` on every call. |
 * | ratelimit.redis_breaker_failures | "5" | an integer from 1 to 1000000 | Redis failures within `redis_breaker_window_ms` that open the host's breaker (calls then skip Redis). |
 * | ratelimit.redis_breaker_window_ms | "10000" | milliseconds from 1 to 3600000 | The window of `redis_breaker_failures`. |
 * | ratelimit.redis_breaker_retry_ms | "1000" | milliseconds from 1 to 3600000 | How long the breaker stays open before one probe per host, always a decision, is let through (other calls stay refused until it closes the breaker). |
 * END GENERATED directives
 *
 * Subjects are never stored: only the first 16 bytes of HMAC-SHA256(key, scope . "\0" . subject).
 * A subject that parses whole as an IP address is normalised first (IPv4-mapped IPv6 becomes
 * dotted IPv4; IPv6 is cut to ratelimit.ipv6_prefix bits, in RFC 5952 form).
 *
 * Keep the key file outside the web root and apart from the database; do not put the database
 * on NFS; do not open the database with PDO/SQLite3 in the same process.
 */

namespace RateLimit {

    /**
     * The answer of ratelimit_acquire(), ratelimit_reserve(), ratelimit_acquire_all() or ratelimit_peek(). Final, with read-only properties;
     * not created from PHP code.
     */
    final class Decision
    {
        /**
         * True when the call may go ahead (also when "unavailable" with ratelimit.fail_open=1, and
         * for a would-be denial of a shadow scope: see `$dryRun`).
         */
        public readonly bool $allowed;

        /**
         * Why: "ok" (allowed), "rate" (not enough tokens), "inflight" (tokens suffice but all
         * `$inflight` slots are held by live leases), "in_progress" (a retry with the same
         * `$request_id` and terms while the first admission's lease is live: the first request
         * still runs; `$retryAfter` is until that lease ends), "unavailable" (the database
         * stayed busy for ratelimit.busy_timeout_ms, the storage failed: disk full, read-only,
         * I/O error, a corrupt file moved aside; or every bucket holds a live lease and the
         * table is full).
         */
        public readonly string $reason;

        /** The bucket size used for this decision (the requested `$limit`, or ratelimit.limit). */
        public readonly int $limit;

        /** Whole tokens left in the bucket after this decision; 0 when "unavailable". */
        public readonly int $remaining;

        /**
         * Seconds until a retry can succeed; 0.0 when admitted (a shadow scope's would-be denial
         * keeps the real wait).
         * - "rate": exact, the time until the bucket holds `$cost` tokens again.
         * - "inflight": an estimate, an upper bound: seconds until the earliest live lease of this
         *   subject and scope expires (ratelimit.lease_ttl after it was taken); a release frees
         *   the slot sooner.
         * - "in_progress": an upper bound likewise: seconds until the first admission's lease
         *   expires (its release, at the end of its request, ends it sooner).
         * - "unavailable": an estimate, always 1.0.
         */
        public readonly float $retryAfter;

        /** Seconds until the bucket is full again (0.0 when it is full, and when "unavailable"). */
        public readonly float $resetAfter;

        /**
         * Seconds to wait before going ahead: for ratelimit_reserve(), the exact time until the
         * tokens it booked are earned (0.0 when they were there now); 0.0 for every other call.
         * The call is allowed and its tokens are taken: sleep this long, then do the work.
         */
        public readonly float $waitFor;

        /**
         * Whole tokens taken ahead of what the policy had, and not yet earned back when this
         * decision was made: a token bucket's reservations still to be earned, a window's count
         * past `$limit` in its current window (so Laravel's attempts are `limit - remaining +
         * reserved`). 0 for a bucket that owes nothing, and for ratelimit_acquire_all().
         */
        public readonly int $reserved;

        /**
         * The lease taken by an allowed call with `$inflight > 0`, as an opaque token that any
         * process (of any host sharing the store) can release. Null otherwise (also when allowed
         * by fail_open, and for a replay). Give it (or this Decision) to ratelimit_release(); it
         * also ends at the end of the request (see ratelimit_end_request() for long-running
         * workers) and ratelimit.lease_ttl seconds after it was taken. Not when this Decision is
         * destroyed: a Decision not kept (`ratelimit_acquire(...)->allowed`) would free its slot
         * at once.
         *
         * Format, versioned: a version character, then lowercase hexadecimal. Version "1" (97
         * characters): "1", the lease's 128 random bits, then the pseudonyms of its bucket and of
         * its subject (never the subject itself). Treat it as opaque: a later version may be
         * longer; store it as a string of up to 255 bytes.
         */
        public readonly ?string $lease;

        /**
         * True when the scope is a shadow one (ratelimit.dry_run) and this call would have been
         * denied: `$allowed` is then true, `$reason` the real one ("rate" or "inflight"),
         * `$retryAfter` the real wait, `$lease` null, and headers() has no Retry-After.
         */
        public readonly bool $dryRun;

        /**
         * True only for a replay: a retry with the same `$request_id` and terms answered as a
         * repeat of an earlier admission (see ratelimit_acquire()). `$allowed` is true, `$reason`
         * "ok", `$source` "replay" ("fallback" when this host's local fallback answered it while
         * Redis was unavailable); it took nothing and holds no lease (`$lease` null: releasing
         * it frees nothing); `$remaining`, `$resetAfter` and headers() describe the bucket as it
         * stands now. The work of the request was admitted once already: do not run it again
         * (answer what the first attempt answered, e.g. 200 "already accepted").
         */
        public readonly bool $replay;

        /**
         * Who decided: "store" (the configured store, in its atomic step), "deny_cache" (a
         * recent "rate" denial of this bucket repeated locally, without asking the store, until
         * its wait is over), "fallback" (the primary store, e.g. Redis, was unavailable: this
         * host's local SQLite file decided), "fail_open" (no store could decide: `$reason`
         * is "unavailable", and ratelimit.fail_open decided: allowed when it is 1, denied when
         * it is 0) or "replay" (the store repeated an earlier admission: see `$replay`).
         */
        public readonly string $source;

        /** The scope of the bucket. */
        public readonly string $scope;

        /**
         * The IETF draft-ietf-httpapi-ratelimit-headers-10 response fields, in structured-field
         * syntax, never with a partition key:
         *
         * - 'RateLimit-Policy' => '"<scope>";q=<limit>;w=<per rounded up>'
         * - 'RateLimit'        => '"<scope>";r=<remaining>;t=<whole seconds until the next token, 0 when full>'
         * - 'Retry-After'      => '<retryAfter rounded up, at least 1, never less than t>' (denials only)
         *
         * e.g. ['RateLimit-Policy' => '"default";q=5;w=60', 'RateLimit' => '"default";r=4;t=12']
         *
         * @return array<string, string>
         */
        public function headers(): array {}

        /** Decisions come only from ratelimit_acquire() and ratelimit_peek(): `new` throws. */
        private function __construct() {}
    }

    /**
     * What an operator must fix before anything works: a key file missing, shorter than 32
     * bytes, weak or not ours; a database path not creatable or not ours; two key files on one
     * database. The message names the path (e.g. "ratelimit: key file /x/y.key: ...") and never
     * a subject. A storage fault met while deciding is not an exception but a decision with
     * reason "unavailable". Nothing is ever allowed by an error.
     */
    class Exception extends \RuntimeException
    {
    }
}

namespace {

    /**
     * Takes `$cost` tokens (and, with `$inflight > 0`, one in-flight slot) from the bucket of
     * `$subject` in `$scope`, in one write transaction shared by all processes of the host.
     * A denial takes nothing.
     *
     * How the tokens come back is `$policy` (Symfony's names):
     * - "token_bucket" (the default): a bucket holds `$limit` tokens and refills `$limit`
     *   tokens every `$per` seconds, continuously;
     * - "fixed_window": at most `$limit` tokens in a window of `$per` seconds that starts at
     *   its first admission and keeps that admission's `$per` (`resetAfter` and `retryAfter`:
     *   until the window ends), then the next admission starts the next window; Laravel's
     *   RateLimiter counts this way;
     * - "sliding_window": the tokens of the current window plus those of the previous one
     *   weighted by the part of it still inside the last `$per` seconds (rounded down to whole
     *   tokens), as Symfony's sliding window;
     * - "stepped_bucket": a bucket of `$limit` tokens that gets `$amount` tokens (null:
     *   `$limit`) back at each whole `$per` seconds, all at once, the steps counted from its
     *   first call (they keep their phase; a bucket found full starts them anew), as Symfony's
     *   token_bucket with `rate` `$amount` per `$per`.
     * Another `$policy` on an existing bucket (same subject and scope) restates it under the
     * new one with exactly what it had available: nothing is given, nothing used is forgotten.
     *
     * @param string   $subject  what is limited (an IP address, a user id, ...); 1 .. 1024 bytes.
     *                           An IP address is normalised (see ratelimit.ipv6_prefix).
     * @param int|null $limit    bucket size, 1 .. 10^12; null: ratelimit.limit (60)
     * @param float|null $per    seconds to refill `$limit` tokens, 0.001 .. 10^9; null: ratelimit.per (60)
     * @param int|null $inflight most live leases of this subject and scope, >= 0 (0: take no lease);
     *                           null: ratelimit.inflight (0)
     * @param string   $scope    1 .. 64 characters of [A-Za-z0-9_.:-]; buckets of different scopes
     *                           are independent
     * @param int      $cost     tokens taken, 1 .. `$limit`
     * @param string|null $request_id what makes a retry the same request (an Idempotency-Key
     *                           header, a queue's job id), 1 .. 255 bytes, never stored in
     *                           clear (a pseudonym of scope, subject and id). An admission with
     *                           it is remembered for ratelimit.request_ttl seconds (with a
     *                           lease, at least ratelimit.lease_ttl) with its terms: this
     *                           function, `$limit`, `$per`, `$cost`, `$inflight`, `$scope`,
     *                           `$policy` and `$amount`.
     *                           A later call with the same subject, scope, id and terms is:
     *                           - while the first admission's lease lives: denied, reason
     *                             "in_progress", `$retryAfter` until that lease ends, nothing
     *                             taken, no lease (never two in flight for one id);
     *                           - otherwise a replay, at most ratelimit.request_replays times:
     *                             allowed with `$replay` true and `$source` "replay", nothing
     *                             taken, no lease (counted as `retries`): do not run the work
     *                             again;
     *                           - after that, charged like any call (and remembered anew).
     *                           A call with the same id and other terms (another cost, limit,
     *                           period, inflight, policy or amount, or ratelimit_acquire_all())
     *                           is charged like any call, never free and never an error: the id
     *                           comes from the client, who may reuse it with other parameters. A
     *                           denial is not remembered.
     * @param string   $policy   "token_bucket", "fixed_window", "sliding_window" or "stepped_bucket"
     *                           (see above)
     * @param int|null $amount   "stepped_bucket": tokens back at each step, 1 .. 10^12 (null:
     *                           `$limit`; more than `$limit` fills the bucket); must be null
     *                           for another `$policy`
     *
     * @return \RateLimit\Decision reason "ok", "rate", "inflight", "in_progress" or "unavailable"
     *
     * @throws \ValueError            an argument out of its bounds (e.g. "ratelimit_acquire(): Argument #2
     *                                ($limit) must be greater than 0"; "Argument #8 ($policy) must be
     *                                "token_bucket", "fixed_window", "sliding_window", or "stepped_bucket"";
     *                                "Argument #9 ($amount) must be null unless argument #8 ($policy)
     *                                is "stepped_bucket"")
     * @throws \TypeError             an argument of the wrong type
     * @throws \RateLimit\Exception   key file missing, short, weak or not ours; database not creatable or not ours
     */
    function ratelimit_acquire(string $subject, ?int $limit = null, ?float $per = null, ?int $inflight = null, string $scope = "default", int $cost = 1, ?string $request_id = null, string $policy = "token_bucket", ?int $amount = null): \RateLimit\Decision {}

    /**
     * Takes `$cost` tokens now against the future (Symfony's `reserve($tokens, $maxTime)`,
     * nginx's `limit_req burst=... delay`): when they are not all there, the call books them at
     * the exact instant the policy earns them, if that is at most `$max_wait` seconds away, and
     * answers allowed with `$waitFor` = the seconds until then. Sleep `$waitFor`, then go
     * ahead. Past `$max_wait` it is a denial ("rate", `$retryAfter` as for ratelimit_acquire())
     * that takes nothing. One atomic step of the store: two callers never book the same
     * tokens, and later calls (reservations or ratelimit_acquire()) queue behind a booking.
     *
     * - "token_bucket": each booking is placed where the previous one ends, `$cost` tokens'
     *   earning time later (5 per second: 200 ms apart).
     * - "fixed_window": a booking past `$limit` waits for the window's end and counts in the
     *   current window (`$reserved`); the window's end forgets it, as Symfony's and Laravel's
     *   fixed windows do.
     * - "sliding_window": the wait is the exact instant the weighted count lets the tokens in;
     *   they count in the current window and weigh on the next one.
     * - "stepped_bucket": a booking waits for the step that brings its tokens (never sooner);
     *   what that step leaves over is there from it on, nothing of it before.
     *
     * `$max_wait = INF` books whatever the wait: a forced charge (Laravel's `hit()` past the
     * limit keeps counting). A store that cannot decide answers "unavailable", a denial (never
     * a booking) unless ratelimit.fail_open admits it. A booked call is allowed: headers() has
     * no Retry-After for it. No in-flight lease and no request id.
     *
     * @param string   $subject  what is limited, as for ratelimit_acquire()
     * @param float    $max_wait the longest wait to book, in seconds (whole milliseconds,
     *                           rounded down), >= 0; INF: any wait
     * @param int|null $limit    as for ratelimit_acquire()
     * @param float|null $per    as for ratelimit_acquire()
     * @param string   $scope    as for ratelimit_acquire()
     * @param int      $cost     tokens to take, 1 .. `$limit`; with "fixed_window" up to 10^12
     *                           (counted whole, as Laravel's increment by more than its
     *                           maximum; Symfony's reserve() refuses more than its limit)
     * @param string   $policy   as for ratelimit_acquire()
     * @param int|null $amount   as for ratelimit_acquire()
     *
     * @return \RateLimit\Decision reason "ok" (with `$waitFor`), "rate" or "unavailable"
     *
     * @throws \ValueError            an argument out of its bounds (e.g. "ratelimit_reserve():
     *                                Argument #2 ($max_wait) must be greater than or equal to 0"
     *                                for a negative wait or NAN)
     * @throws \TypeError             an argument of the wrong type
     * @throws \RateLimit\Exception   as for ratelimit_acquire()
     */
    function ratelimit_reserve(string $subject, float $max_wait, ?int $limit = null, ?float $per = null, string $scope = "default", int $cost = 1, string $policy = "token_bucket", ?int $amount = null): \RateLimit\Decision {}

    /**
     * Compound limits, all or nothing: takes `$cost` tokens from every bucket of `$subject`
     * that `$limits` names (for instance 5 per second and 1,000 per day), in one atomic step of
     * the store (one write transaction; on Redis one script, a subject's buckets sharing one
     * hash tag). Every limit is refilled and checked before any is charged: a denial by any
     * one charges none.
     *
     * The Decision is the tightest limit's: when denied, the denying limit with the longest
     * wait (its scope, remaining and retryAfter); when allowed, the limit with the fewest
     * tokens left (the first one on ties). `headers()` lists every limit: `RateLimit-Policy`
     * and `RateLimit` as structured-field lists, one member per scope, in the order given.
     * Shadow scopes (ratelimit.dry_run): when only shadow limits deny, the call is answered
     * allowed with `dryRun` true and the real reason (nothing is charged); when a real limit
     * denies, it is a denial. The call counts once in ratelimit_stats().
     *
     * @param string   $subject  what is limited, as for ratelimit_acquire()
     * @param array    $limits   1 .. 8 limits, a list of `['limit' => int, 'per' => int|float,
     *                           'scope' => string]` and optionally `'policy' => string` and
     *                           `'amount' => int` (only these keys, values not coerced; bounds
     *                           as ratelimit_acquire()'s `$limit`, `$per`, `$scope`, `$policy`
     *                           and `$amount`, each limit its own),
     *                           each scope once; a limit's bucket is the one ratelimit_acquire()
     *                           and ratelimit_peek() use for that subject and scope
     * @param int      $cost     tokens taken from every bucket, 1 .. the smallest `limit`
     * @param int|null $inflight most live leases, >= 0, of the FIRST limit's bucket (the
     *                           only one that holds a lease); null: ratelimit.inflight (0)
     * @param string|null $request_id as for ratelimit_acquire(), remembered in the FIRST limit's
     *                           bucket; the terms are every limit (scope, limit, per, policy,
     *                           amount), `$cost` and `$inflight`. A replay reports the limit with the fewest
     *                           tokens left, an "in_progress" denial the first limit; both take
     *                           nothing, and their headers show every limit as it stands
     *
     * @return \RateLimit\Decision reason "ok", "rate", "inflight", "in_progress" or "unavailable"
     *
     * @throws \ValueError            an argument or an element out of its bounds, naming its
     *                                index (e.g. "ratelimit_acquire_all(): Argument #2 ($limits)
     *                                [1]["per"] must be greater than or equal to 0.001", "... [1]
     *                                must have a "per" key", "Argument #2 ($limits) must contain
     *                                1 to 8 limits", a scope given twice)
     * @throws \TypeError             an argument or an element of the wrong type (e.g. "...
     *                                [0]["limit"] must be of type int, string given")
     * @throws \RateLimit\Exception   as for ratelimit_acquire()
     */
    function ratelimit_acquire_all(string $subject, array $limits, int $cost = 1, ?int $inflight = null, ?string $request_id = null): \RateLimit\Decision {}

    /**
     * Ends a lease before its request ends. Idempotent: true only when this call freed a live slot;
     * false for a lease already released or expired, unknown, or a Decision without a lease; false
     * also when the store cannot be reached in time (busy, down, its breaker open): the lease then
     * stays until its own request ends or `ratelimit.lease_ttl` passes, never longer.
     *
     * @param \RateLimit\Decision|string $lease a Decision, or its `lease` token
     *
     * @throws \ValueError          a string that is not a lease token of a version this build knows
     * @throws \TypeError           neither a Decision nor a string
     * @throws \RateLimit\Exception key file missing, short, weak or not ours; database not creatable or not ours
     */
    function ratelimit_release(\RateLimit\Decision|string $lease): bool {}

    /**
     * Ends the current request's leases, as the end of a PHP request does: every lease taken by
     * this worker (this process, or this thread of a thread-safe PHP) since the last end and
     * not released. For a long-running worker whose HTTP requests all run inside one PHP request
     * (RoadRunner, Swoole, Laravel Octane: the Laravel bridge calls it on Octane's
     * RequestTerminated): call it after each HTTP request. FrankenPHP (classic and worker mode)
     * and PHP-FPM need no call: the SAPI's end of each request does the same.
     *
     * Not between the concurrent requests of Swoole coroutines, which share the worker: it
     * would end the leases of the others too; release each Decision with ratelimit_release()
     * there. A worker keeps at most 1024 leases for this; past that the oldest is left to its
     * release or ratelimit.lease_ttl (never freed while it may be in use), said once in the log.
     *
     * Opens nothing: with no store open yet it returns 0.
     *
     * @return int how many of those leases were live (a lease already released elsewhere, or
     *             expired, frees nothing); 0 when the store could not be written (the leases
     *             then end at ratelimit.lease_ttl)
     *
     * @throws \ArgumentCountError given any argument
     */
    function ratelimit_end_request(): int {}

    /**
     * Answers what a ratelimit_acquire() of cost 1 (without in-flight slot) would get from the
     * tokens now, and writes nothing (no row, no counter). reason is "ok" or "rate". A bucket
     * of another policy is answered as that call would restate it.
     *
     * @param string     $subject 1 .. 1024 bytes
     * @param int|null   $limit   1 .. 10^12; null: ratelimit.limit
     * @param float|null $per     0.001 .. 10^9 seconds; null: ratelimit.per
     * @param string     $scope   1 .. 64 characters of [A-Za-z0-9_.:-]
     * @param string     $policy  "token_bucket", "fixed_window", "sliding_window" or
     *                            "stepped_bucket", as for ratelimit_acquire()
     * @param int|null   $amount  as for ratelimit_acquire()
     *
     * @throws \ValueError          an argument out of its bounds
     * @throws \TypeError           an argument of the wrong type
     * @throws \RateLimit\Exception key file missing, short, weak or not ours; database not creatable or not ours
     */
    function ratelimit_peek(string $subject, ?int $limit = null, ?float $per = null, string $scope = "default", string $policy = "token_bucket", ?int $amount = null): \RateLimit\Decision {}

    /**
     * Gives `$cost` tokens back to the bucket of `$subject` in `$scope`, in one atomic step of
     * the store, as rate-limiter-flexible's reward() or Laravel's decrement() do: for work that
     * was admitted and then not done (a failed call, a cancelled job). The bucket is brought
     * up to now first, as a decision would, then:
     * - token_bucket: the tokens come back, never past `$limit`; a bucket in debt
     *   (ratelimit_reserve() booked ahead) has its booked instant moved earlier by the time the
     *   tokens take to earn, rounded down, never before now;
     * - stepped_bucket: the tokens come back, never past `$limit`; in debt they add to what
     *   the booked step leaves over (the step itself stays);
     * - fixed_window, sliding_window: the count of the window running now is lowered, never
     *   below 0; a window that has ended with nothing counted since is left alone.
     * A bucket that forced reservations took past what it can count (a booking at the latest
     * bookable instant, a window's count at its bound) gets nothing back.
     * A subject with no bucket is left without one (it is full already). A refund never holds
     * more than a full bucket, and a clock that went back earns nothing.
     * The worker's cached denials of the bucket end, and on SQLite those of the host's other
     * workers too (on Redis theirs end when their wait does: they deny longer, never admit).
     *
     * The store cannot check that the tokens were taken, nor when: give back only what a call
     * of yours took, with the same `$limit`, `$per`, `$scope`, `$policy` and `$amount`, before
     * the window it was taken in ends (a sliding window's: before the next one starts; a token
     * bucket's: before it would have refilled). A refund made later lowers a later window's
     * count, which then admits past its limit: it mints. Only a Decision whose `source` is
     * "store" and `dryRun` false took anything from the store a refund goes to (not a shadow
     * scope's would-be denial, a fail_open admission, a replay, nor the local fallback's
     * decision).
     *
     * @param string     $subject 1 .. 1024 bytes
     * @param int        $cost    1 .. 10^12 tokens (past `$limit` is accepted: a window may
     *                            count past its limit)
     * @param int|null   $limit   1 .. 10^12; null: ratelimit.limit
     * @param float|null $per     0.001 .. 10^9 seconds; null: ratelimit.per
     * @param string     $scope   1 .. 64 characters of [A-Za-z0-9_.:-]
     * @param string     $policy  "token_bucket", "fixed_window", "sliding_window" or
     *                            "stepped_bucket", as for ratelimit_acquire()
     * @param int|null   $amount  as for ratelimit_acquire()
     *
     * @return bool true when tokens were given back; false when there was nothing to give
     *              back to (no bucket, a full bucket, an empty or ended window) and when the
     *              store could not be written (busy, down: the tokens then stay taken, which
     *              can only deny more, never admit more; with Redis, also while the local
     *              fallback decides)
     *
     * @throws \ValueError          an argument out of its bounds
     * @throws \TypeError           an argument of the wrong type
     * @throws \RateLimit\Exception key file missing, short, weak or not ours; database not creatable or not ours
     */
    function ratelimit_refund(string $subject, int $cost = 1, ?int $limit = null, ?float $per = null, string $scope = "default", string $policy = "token_bucket", ?int $amount = null): bool {}

    /**
     * Forgets the bucket and the leases of `$subject` in `$scope`.
     *
     * @param string $subject 1 .. 1024 bytes
     * @param string $scope   1 .. 64 characters of [A-Za-z0-9_.:-]
     *
     * @return bool true when there was something to forget
     *
     * @throws \ValueError          an argument out of its bounds
     * @throws \TypeError           an argument of the wrong type
     * @throws \RateLimit\Exception key file missing, short, weak or not ours; database not creatable or not ours
     */
    function ratelimit_reset(string $subject, string $scope = "default"): bool {}

    /**
     * Host-wide counters of all workers, kept in the database file (a count that could not be
     * written while the file was busy, and a denial decided from a snapshot, are written by that
     * worker's next write, within about a second, or at its end; its own stats include them):
     *
     * - allowed, denied_rate, denied_inflight, denied_in_progress, unavailable: decisions by
     *   outcome (denied_in_progress: retries of a `$request_id` while its first admission's
     *   lease lived; not in a bucket's counts of ratelimit_top())
     * - leases_expired: leases ended by ratelimit.lease_ttl
     * - evicted: least recently used buckets dropped to keep ratelimit.max_entries
     * - clock_regressions: decisions that saw the wall clock behind a bucket's stored time
     * - keys_migrated: buckets moved from ratelimit.key_file_previous's key to the current one
     * - reopened: times a worker found the database removed or replaced and opened the path anew
     * - storage_errors: storage faults met while deciding (each an "unavailable" decision)
     * - dry_run_denied: denials of shadow scopes (ratelimit.dry_run) answered allowed; each is
     *   counted under denied_rate or denied_inflight too
     * - retries: replays, calls answered as a repeat of an earlier admission of the same
     *   `$request_id` and terms, taking nothing
     * - redis_errors: failed calls to the primary store (Redis) behind the host's breaker
     * - fallback_switches: times the host's breaker opened and decisions moved to the local
     *   fallback (counted once per host, not per worker)
     * - fallback_decisions: decisions made by the local fallback (each counted by its outcome too)
     * - entries (gauge): buckets stored now
     * - live_leases (gauge): leases live now
     * - backend: "sqlite" or "redis" (ratelimit.backend)
     * - redis_path (redis only): "module" when the server has the native commands of
     *   libratelimit_redis.so (`redis-server --loadmodule`), "script" when decisions run as Lua
     *   scripts
     * - breaker: the host's breaker in front of the primary store, "closed", "open" or
     *   "half-open" ("closed" when there is none, as for SQLite)
     * - partial: true while the store cannot be read (Redis down, the file busy): the counts are
     *   then only what this host (its local fallback's file) and this worker know, and the
     *   gauges may be 0; never an exception for that
     *
     * @return array{allowed: int, denied_rate: int, denied_inflight: int, denied_in_progress: int, unavailable: int, leases_expired: int, evicted: int, clock_regressions: int, keys_migrated: int, reopened: int, storage_errors: int, dry_run_denied: int, retries: int, redis_errors: int, fallback_switches: int, fallback_decisions: int, entries: int, live_leases: int, backend: string, redis_path?: string, breaker: string, partial: bool}
     *
     * @throws \RateLimit\Exception database not creatable or not ours; Redis refusing the settings
     */
    function ratelimit_stats(): array {}

    /**
     * The counters and gauges of ratelimit_stats() in the Prometheus text exposition format
     * 0.0.4, for a scrape endpoint (send it as `Content-Type: text/plain; version=0.0.4`):
     *
     * - ratelimit_info{backend, version} (gauge, always 1)
     * - ratelimit_decisions_total{result="allowed|rate|inflight|in_progress|unavailable"}
     * - ratelimit_leases_expired_total, ratelimit_evicted_total, ratelimit_clock_regressions_total,
     *   ratelimit_keys_migrated_total, ratelimit_reopened_total, ratelimit_storage_errors_total,
     *   ratelimit_dry_run_denied_total, ratelimit_retries_total, ratelimit_redis_errors_total,
     *   ratelimit_fallback_switches_total, ratelimit_fallback_decisions_total
     * - ratelimit_entries, ratelimit_live_leases (gauges)
     * - ratelimit_breaker_state (gauge): 0 closed (or no breaker), 1 half-open, 2 open
     * - ratelimit_stats_partial (gauge): 1 while the store cannot be read (Redis down); the
     *   counters and the entries and live_leases gauges are then left out of the scrape rather
     *   than reset to one host's counts (which a scraper would read as a counter reset)
     *
     * No label ever names a subject or a pseudonym.
     *
     * @throws \RateLimit\Exception database not creatable or not ours; Redis refusing the settings
     */
    function ratelimit_metrics(): string {}

    /**
     * The pressure view: at most $n buckets with at least one denial, most denials first (then
     * the most recently used), each named only by its pseudonym, never by its subject. A read:
     * it never blocks a decision. Each entry:
     *
     * - pseudonym: the bucket's 16-byte pseudonym in hex (32 characters)
     * - tokens: tokens held at `stamp` (before the refill since; the policy is the caller's)
     * - stamp: Unix time (seconds, as microtime(true)) up to which earnings are credited
     * - full_at: Unix time from which the bucket is full again
     * - used_at: Unix time of its last decision (to a tenth of a second)
     * - denied, denied_rate, denied_inflight, allowed: its decisions since the bucket was stored
     * - live_leases: its leases live now
     *
     * @param int $n how many buckets, 1 to 1000
     *
     * @return list<array{pseudonym: string, tokens: float, stamp: float, full_at: float, used_at: float, denied: int, denied_rate: int, denied_inflight: int, allowed: int, live_leases: int}>
     *
     * @throws \ValueError          $n out of its bounds
     * @throws \TypeError           $n of the wrong type
     * @throws \RateLimit\Exception database not creatable or not ours
     */
    function ratelimit_top(int $n = 10): array {}
}
