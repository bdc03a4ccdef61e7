<?php
// What `WAIT 1 100` after each decision would cost, for php-tests/sentinel/run: a script doing
// what every token bucket script does at the least (TIME, GET, SET PX), called alone, then
// pipelined with WAIT 1 100 (the answer waits until a replica has the write), from one client,
// 3 interleaved rounds of 2,000 calls each. Prints "PLAIN_US WAITED_US all|N-missing": the
// medians per call in microseconds, and whether every WAIT saw a replica acknowledge.
//   php -n wait.php PORT
declare(strict_types=1);
$fp = stream_socket_client("tcp://127.0.0.1:$argv[1]", $errno, $err, 5.0) or exit(1);
stream_set_timeout($fp, 5);
stream_set_write_buffer($fp, 0);

function req(string ...$args): string
{
    $r = '*' . count($args) . "\r\n";
    foreach ($args as $a) {
        $r .= '$' . strlen($a) . "\r\n$a\r\n";
    }
    return $r;
}

function reply($fp): string
{
    $line = fgets($fp);
    if ($line === false) {
        throw new RuntimeException('no reply');
    }
    if ($line[0] === '$') {
        $n = (int) substr($line, 1);
        if ($n < 0) {
            return '';
        }
        $data = '';
        while (strlen($data) < $n + 2) {
            $data .= fread($fp, $n + 2 - strlen($data));
        }
        return substr($data, 0, -2);
    }
    if ($line[0] === '-') {
        throw new RuntimeException(trim($line));
    }
    return trim(substr($line, 1));
}

$lua = "local t = redis.call('TIME') local v = redis.call('GET', KEYS[1]) "
    . "redis.call('SET', KEYS[1], t[1] .. ' ' .. t[2], 'PX', 60000) return 1";
fwrite($fp, req('SCRIPT', 'LOAD', $lua));
$sha = reply($fp);
$call = req('EVALSHA', $sha, '1', 'rl:wait-cost');
$wait = req('WAIT', '1', '100');
$plain = $waited = [];
$missing = 0;
for ($round = 0; $round < 3; $round++) {
    for ($i = 0; $i < 2000; $i++) {
        $t = hrtime(true);
        fwrite($fp, $call);
        reply($fp);
        $plain[] = hrtime(true) - $t;
    }
    for ($i = 0; $i < 2000; $i++) {
        $t = hrtime(true);
        fwrite($fp, $call . $wait);
        reply($fp);
        if ((int) reply($fp) < 1) {
            $missing++;
        }
        $waited[] = hrtime(true) - $t;
    }
}
$median = function (array $v): string {
    sort($v);
    return number_format($v[intdiv(count($v), 2)] / 1000, 1, '.', '');
};
echo $median($plain), ' ', $median($waited), ' ', $missing === 0 ? 'all' : "$missing-missing", "\n";
