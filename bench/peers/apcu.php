<?php
// Peer 3: APCu token bucket. The bucket is kept as one integer, its theoretical arrival time in
// microseconds (GCRA, the single-number form of a token bucket), created with apcu_entry() and
// updated with apcu_cas(), so concurrent workers of one FPM master never over-admit. Only the
// processes that share one APCu segment share the limit (one FPM master, or fork()ed CLI children).
declare(strict_types=1);

return static function (array $o): object {
    return new class ($o['limit'], $o['per']) {
        private int $step;   // us per token
        private int $burst;  // us of credit a full bucket holds

        public function __construct(int $limit, float $per)
        {
            $this->step = (int) ceil($per * 1e6 / $limit);
            $this->burst = $this->step * $limit;
        }

        public function acquire(string $subject): bool
        {
            $key = 'rl:' . $subject;
            for ($try = 0; $try < 1000; $try++) {
                $now = (int) (microtime(true) * 1e6);
                $tat = apcu_entry($key, static fn (): int => 0);
                $next = max($tat, $now) + $this->step;
                if ($next - $now > $this->burst) {
                    return false;
                }
                if (apcu_cas($key, $tat, $next)) {
                    return true;
                }
            }
            return false;  // lost the race 1000 times: deny rather than spin on
        }
    };
};
