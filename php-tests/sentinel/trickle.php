<?php
// A fault injector for php-tests/sentinel/run, not a Redis: on 127.0.0.1, a port of its own
// (written to the file given), it answers every read it gets with a reply of 200 bytes (a bulk
// string) sent one byte every 10 ms, 2 s in all. A client that gives each read the whole
// timeout waits for all of it.
//   php -n trickle.php PORTFILE
declare(strict_types=1);
$server = stream_socket_server('tcp://127.0.0.1:0', $errno, $err) or exit(1);
file_put_contents($argv[1], substr(strrchr(stream_socket_get_name($server, false), ':'), 1) . "\n");
$clients = [];   // id => [stream, bytes owed]
$next = hrtime(true);
while (true) {
    $read = [$server];
    foreach ($clients as [$c]) {
        $read[] = $c;
    }
    $w = $e = null;
    if (@stream_select($read, $w, $e, 0, 2000) === false) {
        continue;
    }
    foreach ($read as $r) {
        if ($r === $server) {
            $c = @stream_socket_accept($server, 0);
            if ($c) {
                $clients[(int) $c] = [$c, ''];
            }
            continue;
        }
        $data = @fread($r, 65536);
        if ($data === '' || $data === false) {
            fclose($r);
            unset($clients[(int) $r]);
        } else {
            $clients[(int) $r][1] .= "\$200\r\n" . str_repeat('x', 200) . "\r\n";
        }
    }
    if (hrtime(true) >= $next) {
        $next = hrtime(true) + 10_000_000;
        foreach ($clients as $id => [$c, $owed]) {
            if ($owed !== '') {
                @fwrite($c, $owed[0]);
                $clients[$id][1] = substr($owed, 1);
            }
        }
    }
}
