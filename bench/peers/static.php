<?php
// Peer 4: token bucket in a per-process static array. WRONG as a limiter (every process, and in
// FPM every request, has its own buckets); shown for the cost of the arithmetic alone.
declare(strict_types=1);

return static function (array $o): object {
    return new class ($o['limit'], $o['per']) {
        private float $rate;

        public function __construct(private int $limit, float $per)
        {
            $this->rate = $limit / $per;
        }

        public function acquire(string $subject): bool
        {
            static $buckets = [];
            $now = microtime(true);
            [$tokens, $ts] = $buckets[$subject] ?? [(float) $this->limit, $now];
            $tokens = min((float) $this->limit, $tokens + ($now - $ts) * $this->rate);
            $allowed = $tokens >= 1.0;
            $buckets[$subject] = [$allowed ? $tokens - 1.0 : $tokens, $now];
            return $allowed;
        }
    };
};
