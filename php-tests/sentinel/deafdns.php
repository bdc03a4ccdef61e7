<?php
// A fault injector for php-tests/sentinel/run: a DNS server that never answers, on UDP port 53
// of the address given (a loopback one), reading every query and dropping it.
//   php -n deafdns.php ADDRESS
$s = stream_socket_server("udp://$argv[1]:53", $errno, $err, STREAM_SERVER_BIND) or exit(1);
echo "ready\n";
while (true) {
    stream_socket_recvfrom($s, 4096);
}
