--TEST--
ratelimit.key_fingerprint pins the key: phpinfo() shows the key file's fingerprint, a process holding that key decides, one holding another (a fresh host with a wrong key, before any store could tell it) gets a RateLimit\Exception naming the directive, also after its key file is replaced
--EXTENSIONS--
ratelimit
--INI--
ratelimit.key_file={TMP}/rl-phpt-key_fingerprint_pinned/k.key
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();
$key = ini_get('ratelimit.key_file');
file_put_contents($key, random_bytes(32));
chmod($key, 0600);
file_put_contents("$dir/wrong.key", random_bytes(32));
chmod("$dir/wrong.key", 0600);
ob_start();
phpinfo(INFO_MODULES);
preg_match('/Key fingerprint => ([0-9a-f]{16})/', ob_get_clean(), $m);
$fp = $m[1] ?? '';
echo "phpinfo shows 16 hex digits: ", var_export(strlen($fp) === 16, true), "\n";
$try = 'try { echo ratelimit_acquire("s", 5, 60)->reason, "\n"; } catch (RateLimit\Exception $e) { echo "refused: ", $e->getMessage(), "\n"; }';
$r = rl_run(['ratelimit.key_fingerprint' => $fp], $try);
echo "the pinned key: ", trim($r['out']), "\n";
$r = rl_run(['ratelimit.key_fingerprint' => $fp, 'ratelimit.key_file' => "$dir/wrong.key", 'ratelimit.db_path' => "$dir/other-host.sqlite"], $try);
echo "another key, on a store of its own: ", str_contains($r['out'], "refused: ratelimit: key file $dir/wrong.key holds key") && str_contains($r['out'], "not key $fp that ratelimit.key_fingerprint pins") ? 'refused naming both' : trim($r['out']), "\n";
$w = rl_worker(['ratelimit.key_fingerprint' => $fp]);
echo "a running process: ", rl_worker_cmd($w, 'a s 5 60'), "\n";
rename("$dir/wrong.key", $key);
rl_pause(1.1);
echo "its key file replaced by another key: ", str_contains(rl_worker_cmd($w, 'a s 5 60'), 'ratelimit.key_fingerprint pins') ? 'refused' : 'decided', "\n";
rl_worker_stop($w);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('key_fingerprint_pinned');
?>
--EXPECT--
phpinfo shows 16 hex digits: true
the pinned key: ok
another key, on a store of its own: refused naming both
a running process: ok
its key file replaced by another key: refused
