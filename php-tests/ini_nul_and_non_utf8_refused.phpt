--TEST--
php.ini values with a NUL byte or not in UTF-8 are refused like any invalid value (a startup warning naming the directive, every call a RateLimit\Exception naming it), never cut short at the NUL nor rewritten (two different byte paths must not become one file)
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();
$code = 'try { ratelimit_acquire("s", 5, 60); echo "decided\n"; } catch (Throwable $e) { echo get_class($e), ": ", $e->getMessage(), "\n"; }';
foreach (['db_path' => ["$dir/a\0b.sqlite", 'a NUL byte'], 'key_file' => ["$dir/caf\xE9.key", 'UTF-8']] as $d => [$bad, $why]) {
    // Through an ini file: -d cannot carry a NUL byte.
    file_put_contents("$dir/bad.ini", "ratelimit.$d = \"$bad\"\n");
    $cmd = array_merge([PHP_BINARY, '-n', '-c', "$dir/bad.ini", '-d', 'extension=' . rl_so()], ...array_map(fn($k, $v) => ['-d', "$k=$v"], array_keys($i = array_diff_key(rl_inherited_ini(), ["ratelimit.$d" => 1])), $i));
    $cmd = array_merge($cmd, ['-d', 'display_startup_errors=1', '-d', 'display_errors=1', '-d', 'error_log=', '-r', $code]);
    $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
    proc_close($p);
    echo "ratelimit.$d with $why: warned: ", var_export((bool) preg_match("/Invalid value .* for ratelimit\\.$d/", $out), true),
        "; the call: ", preg_match("/^RateLimit\\\\Exception: .*ratelimit\\.$d \\(/m", $out) ? "RateLimit\\Exception naming it" : trim($out), "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('ini_nul_and_non_utf8_refused');
?>
--EXPECT--
ratelimit.db_path with a NUL byte: warned: true; the call: RateLimit\Exception naming it
ratelimit.key_file with UTF-8: warned: true; the call: RateLimit\Exception naming it
