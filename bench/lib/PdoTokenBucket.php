<?php
// The token bucket a careful PHP developer writes over PDO SQLite (peers pdo-delete, pdo-wal):
// one BEGIN IMMEDIATE transaction per decision (SELECT, refill, check, UPSERT, COMMIT), the
// subject stored only as the first 16 bytes of HMAC-SHA256(key, subject), statements prepared
// once per connection. Continuous refill of `limit` tokens per `per` seconds, kept as integer
// micro-tokens and microseconds: PDO binds a float as a string at `precision` (14 digits, so
// 0.1 ms for a timestamp), and with the clamp on negative elapsed times that rounding mints tokens.
declare(strict_types=1);

final class PdoTokenBucket
{
    private PDO $db;
    private PDOStatement $begin;
    private PDOStatement $select;
    private PDOStatement $upsert;
    private PDOStatement $commit;
    private float $rate;  // micro-tokens per microsecond (= tokens per second)
    private int $full;    // micro-tokens in a full bucket
    private string $key;

    /** @param array{limit:int, per:float, dir:string, key:string, persistent?:bool} $o */
    public function __construct(array $o, bool $wal)
    {
        $this->full = $o['limit'] * 1_000_000;
        $this->rate = $o['limit'] / $o['per'];
        $this->key = $o['key'];
        $this->db = new PDO('sqlite:' . $o['dir'] . '/bucket.sqlite', null, null, [
            PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
            PDO::ATTR_TIMEOUT => 5,                  // busy timeout (s); PDO's default is 60
            PDO::ATTR_PERSISTENT => $o['persistent'] ?? false,
        ]);
        if ($wal) {  // WAL persists in the file; switching needs a lock, so only when not yet done
            if ($this->db->query('PRAGMA journal_mode')->fetchColumn() !== 'wal') {
                $this->db->exec('PRAGMA journal_mode=WAL');
            }
            $this->db->exec('PRAGMA synchronous=NORMAL');
        }
        $this->db->exec('CREATE TABLE IF NOT EXISTS bucket (id BLOB PRIMARY KEY,'
            . ' micro INTEGER NOT NULL, ts INTEGER NOT NULL) WITHOUT ROWID');
        $this->begin = $this->db->prepare('BEGIN IMMEDIATE');
        $this->select = $this->db->prepare('SELECT micro, ts FROM bucket WHERE id = ?');
        $this->upsert = $this->db->prepare('INSERT INTO bucket (id, micro, ts) VALUES (?, ?, ?)'
            . ' ON CONFLICT (id) DO UPDATE SET micro = excluded.micro, ts = excluded.ts');
        $this->commit = $this->db->prepare('COMMIT');
    }

    public function acquire(string $subject): bool
    {
        $id = substr(hash_hmac('sha256', $subject, $this->key, true), 0, 16);
        $this->begin->execute();
        try {
            $now = (int) (microtime(true) * 1e6);  // read inside the write lock, not while waiting
            $this->select->bindValue(1, $id, PDO::PARAM_LOB);
            $this->select->execute();
            $row = $this->select->fetch(PDO::FETCH_NUM);
            $this->select->closeCursor();
            [$micro, $ts] = $row === false ? [$this->full, $now] : [(int) $row[0], (int) $row[1]];
            $earned = (int) (max(0, $now - $ts) * $this->rate);
            if ($earned > 0) {  // else keep the time base: a bucket polled faster still refills
                $micro = min($this->full, $micro + $earned);
                $ts = $now;
            }
            $allowed = $micro >= 1_000_000;
            if ($allowed) {
                $micro -= 1_000_000;
            }
            $this->upsert->bindValue(1, $id, PDO::PARAM_LOB);
            $this->upsert->bindValue(2, $micro, PDO::PARAM_INT);
            $this->upsert->bindValue(3, $ts, PDO::PARAM_INT);
            $this->upsert->execute();
            $this->commit->execute();
            return $allowed;
        } catch (Throwable $e) {
            try {
                $this->db->exec('ROLLBACK');
            } catch (Throwable) {
            }
            throw $e;
        }
    }
}
