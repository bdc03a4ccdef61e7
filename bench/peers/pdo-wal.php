<?php
// Peer 1b: the same token bucket over PDO SQLite with journal_mode=WAL, synchronous=NORMAL.
declare(strict_types=1);
require_once __DIR__ . '/../lib/PdoTokenBucket.php';

return static fn (array $o): PdoTokenBucket => new PdoTokenBucket($o, wal: true);
