<?php
// The loop bench/experiments/lean-value measures: php drive.php PORT N PEER
// N calls round-robin over 1000 subjects, each seeded first with a value of its form (the
// limit is never reached: every call refills, takes and writes). PEER: floor (EVALSHA of
// `return 1`, phpredis), peer (bench/redis/lib.php's phpredis + Lua token bucket), or a
// function of the prototype library: cur (the Function as it is), cur_bin (the same on values
// in binary), bin7, bin2, txt2, tgs.
// With N = 0: prints the medians and p99 of ROUNDS interleaved rounds of every PEER instead;
// with N = -1, writes every peer's values and exits (run once first).
declare(strict_types=1);
require __DIR__ . '/../../redis/lib.php'; // PEER_LUA
[, $port, $n, $which] = $argv + [null, '6379', '1000', 'cur'];
$r = new Redis();
$r->connect('127.0.0.1', (int) $port);
const SUBJECTS = 1000;
// A token each 100 s: never short of tokens in a run, and never full again, so that no bucket
// expires between two calls on it (full, it would one second after its last call: under
// valgrind a round over the subjects takes longer, and a missing bucket goes another way).
const LIMIT = '1000000';
const PER_MS = '100000000000';
$peerSha = $r->script('load', PEER_LUA);
$floorSha = $r->script('load', 'return 1');
$call = function (string $peer, int $i) use ($r, $peerSha, $floorSha) {
    $k = "$peer:" . ($i % SUBJECTS);
    return match ($peer) {
        'floor' => $r->evalSha($floorSha, [$k], 1),
        'peer' => $r->evalSha($peerSha, [$k, LIMIT, PER_MS, '1'], 1),
        // The Function as it is, on values in binary.
        'cur_bin' => $r->rawCommand('FCALL', 'cur', '1', $k, '', LIMIT, PER_MS, '1'),
        default => $r->rawCommand('FCALL', $peer, '1', $k, '', LIMIT, PER_MS, '1'),
    };
};
/** Every subject's value in PEER's form (the peer makes its own hash by a first call). */
function seed(Redis $r, string $peer, Closure $call): void
{
    $cap = (int) LIMIT * 1000;
    $now = (int) (microtime(true) * 1000);
    for ($i = 0; $i < SUBJECTS; $i++) {
        $v = match ($peer) {
            'floor' => null,
            'peer' => $call('peer', $i),
            'bin7', 'cur_bin' => pack('CP7', 1, $cap, $now, $now, $now, 5, 0, 0),
            'bin2' => pack('P2', $cap, $now),
            'txt2' => "$cap $now",
            default => "$cap $now $now $now 5 0 0",
        };
        if (is_string($v)) {
            $r->set("$peer:$i", $v);
        } elseif ($v === false) {
            fwrite(STDERR, "drive.php: $peer failed: " . $r->getLastError() . "\n");
            exit(1);
        }
    }
    // Each call checked once: an error is no figure.
    if ($call($peer, 0) === false) {
        fwrite(STDERR, "drive.php: $peer failed: " . $r->getLastError() . "\n");
        exit(1);
    }
}
$peers = ['floor', 'tgs', 'peer', 'cur', 'cur_bin', 'bin7', 'bin2', 'txt2'];
// N = -1: every peer's values written (before any count: the server's tables then grow, and
// rehash, outside the counted calls).
if ((int) $n < 0) {
    foreach ($peers as $p) {
        seed($r, $p, $call);
    }
    exit(0);
}
if ((int) $n > 0) {
    for ($i = 0; $i < (int) $n; $i++) {
        $call($which, $i);
    }
    exit(0);
}
$rounds = (int) (getenv('ROUNDS') ?: 7);
$med = $p99 = [];
foreach ($peers as $p) {
    seed($r, $p, $call);
}
for ($round = 0; $round < $rounds; $round++) {
    foreach ($round % 2 ? array_reverse($peers) : $peers as $p) {
        $t = [];
        for ($i = 0; $i < 20000; $i++) {
            $a = hrtime(true);
            $call($p, $i);
            $t[] = hrtime(true) - $a;
        }
        sort($t);
        $med[$p][] = $t[10000] / 1000;
        $p99[$p][] = $t[19800] / 1000;
    }
}
$m = function (array $a): float {
    sort($a);
    return $a[intdiv(count($a), 2)];
};
$floor = $m($med['floor']);
foreach ($peers as $p) {
    printf("%-6s median %5.1f us  p99 %5.1f us  %.3fx the floor\n", $p, $m($med[$p]), $m($p99[$p]), $m($med[$p]) / $floor);
}
