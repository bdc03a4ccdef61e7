<?php
// Peer 5: this extension. Database and key file come from php.ini (ratelimit.db_path,
// ratelimit.key_file), set by bench/run with -d or php_admin_value.
declare(strict_types=1);

return static function (array $o): object {
    return new class ($o['limit'], $o['per']) {
        public int $unavailable = 0;  // decisions refused because the file stayed busy

        public function __construct(private int $limit, private float $per)
        {
        }

        public function acquire(string $subject): bool
        {
            $d = ratelimit_acquire($subject, limit: $this->limit, per: $this->per);
            if ($d->reason === 'unavailable') {
                $this->unavailable++;
            }
            return $d->allowed;
        }
    };
};
