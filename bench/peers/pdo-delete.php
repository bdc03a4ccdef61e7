<?php
// Peer 1a: token bucket in plain PHP over PDO SQLite, default rollback journal (DELETE, FULL).
declare(strict_types=1);
require_once __DIR__ . '/../lib/PdoTokenBucket.php';

return static fn (array $o): PdoTokenBucket => new PdoTokenBucket($o, wal: false);
