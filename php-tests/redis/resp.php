<?php
// A few lines of RESP (the Redis protocol) over PHP's own streams, binary-safe, so that
// php-tests/redis/run can read every key of a server (names, DUMP, values) with `php -n` and
// no client extension. TCP, unix socket, or TLS with a CA file.
//
//   php -n resp.php scan KIND ADDR [CA]   the keys of prefix rl:, one a line, hex
//   php -n resp.php audit SUBJECTS_JSON ADDR,ADDR,...
//        every key of those TCP servers: its name, its DUMP (the server's rdbcompression is the
//        caller's business) and its value read by type; prints "KEYS DUMPED FOUND CONTROL WHERE":
//        how many times a subject (raw, hex, base64, lower or upper case) was found outside and
//        inside the planted control key ctl:plant
declare(strict_types=1);

function resp_open(string $kind, string $addr, string $ca = '')
{
    $target = match ($kind) {
        'unix' => "unix://$addr",
        'tls' => "tls://127.0.0.1:$addr",
        default => "tcp://127.0.0.1:$addr",
    };
    $ctx = stream_context_create(['ssl' => ['cafile' => $ca, 'verify_peer' => true, 'peer_name' => '127.0.0.1']]);
    $fp = @stream_socket_client($target, $errno, $err, 5.0, STREAM_CLIENT_CONNECT, $ctx);
    if ($fp === false) {
        throw new RuntimeException("connect $target: $err");
    }
    stream_set_timeout($fp, 5);
    return $fp;
}

function resp_call($fp, string ...$args): mixed
{
    $req = '*' . count($args) . "\r\n";
    foreach ($args as $a) {
        $req .= '$' . strlen($a) . "\r\n$a\r\n";
    }
    fwrite($fp, $req);
    return resp_read($fp);
}

function resp_read($fp): mixed
{
    $line = fgets($fp);
    if ($line === false) {
        throw new RuntimeException('the server closed the connection or timed out');
    }
    $line = substr($line, 0, -2);
    $rest = substr($line, 1);
    switch ($line[0]) {
        case '+':
            return $rest;
        case '-':
            throw new RuntimeException("redis: $rest");
        case ':':
            return (int) $rest;
        case '$':
            if ((int) $rest < 0) {
                return null;
            }
            $data = '';
            $want = (int) $rest + 2;
            while (strlen($data) < $want) {
                $chunk = fread($fp, $want - strlen($data));
                if ($chunk === false || $chunk === '') {
                    throw new RuntimeException('short read');
                }
                $data .= $chunk;
            }
            return substr($data, 0, -2);
        case '*':
            if ((int) $rest < 0) {
                return null;
            }
            $out = [];
            for ($i = 0; $i < (int) $rest; $i++) {
                $out[] = resp_read($fp);
            }
            return $out;
    }
    throw new RuntimeException('bad reply: ' . bin2hex($line));
}

/** @return list<string> every key of the server matching $match */
function resp_scan($fp, string $match): array
{
    $keys = [];
    $cursor = '0';
    do {
        [$cursor, $batch] = resp_call($fp, 'SCAN', $cursor, 'MATCH', $match, 'COUNT', '1000');
        array_push($keys, ...$batch);
    } while ($cursor !== '0');
    return $keys;
}

/** A key's value as bytes, by type (hash fields and values, set and list members, zset members). */
function resp_value($fp, string $key): string
{
    $flat = fn ($v) => is_array($v) ? implode("\n", array_map('strval', $v)) : (string) $v;
    return match (resp_call($fp, 'TYPE', $key)) {
        'string' => (string) resp_call($fp, 'GET', $key),
        'hash' => $flat(resp_call($fp, 'HGETALL', $key)),
        'set' => $flat(resp_call($fp, 'SMEMBERS', $key)),
        'list' => $flat(resp_call($fp, 'LRANGE', $key, '0', '-1')),
        'zset' => $flat(resp_call($fp, 'ZRANGE', $key, '0', '-1', 'WITHSCORES')),
        default => '',
    };
}

try {
    switch ($argv[1] ?? '') {
        case 'scan':
            $fp = resp_open($argv[2], $argv[3], $argv[4] ?? '');
            foreach (resp_scan($fp, 'rl:*') as $k) {
                echo bin2hex($k), "\n";
            }
            break;
        case 'audit':
            $subs = json_decode($argv[2], true, 4, JSON_THROW_ON_ERROR);
            $keys = $dumped = $found = $control = 0;
            $where = [];
            foreach (array_filter(explode(',', $argv[3])) as $port) {
                $fp = resp_open('tcp', $port);
                foreach (resp_scan($fp, '*') as $key) {
                    $keys++;
                    $dump = (string) resp_call($fp, 'DUMP', $key);
                    $dumped += $dump !== '' ? 1 : 0;
                    foreach (['name' => $key, 'DUMP' => $dump, 'value' => resp_value($fp, $key)] as $what => $bytes) {
                        foreach ($subs as $s) {
                            foreach (array_unique([$s, bin2hex($s), base64_encode($s), strtolower($s), strtoupper($s)]) as $form) {
                                if (stripos($bytes, $form) === false) {
                                    continue;
                                }
                                if ($key === 'ctl:plant') {
                                    $control++;
                                } else {
                                    $found++;
                                    $where[] = "$what of a key on :$port";
                                }
                            }
                        }
                    }
                }
            }
            echo "$keys $dumped $found $control ", implode(',', array_unique($where)), "\n";
            break;
        default:
            fwrite(STDERR, "usage: resp.php scan KIND ADDR [CA] | audit SUBJECTS_JSON PORT,PORT,...\n");
            exit(2);
    }
} catch (Throwable $e) {
    fwrite(STDERR, 'resp.php: ' . $e->getMessage() . "\n");
    exit(1);
}
