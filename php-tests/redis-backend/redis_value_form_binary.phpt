--TEST--
ratelimit.redis_value_form=binary: a host writes new buckets in binary, a text host shares them exactly (each bucket kept in the form it was found in); an invalid value is a RateLimit\Exception naming it
--EXTENSIONS--
ratelimit
--SKIPIF--
<?php require __DIR__ . '/../_helpers.inc'; if (rl_backend() !== 'redis') die('skip the Redis backend only (runs with RL_TEST_BACKEND=redis)'); ?>
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_isolate();
$sock = "$dir/plain.sock";
$server = proc_open(['redis-server', '--port', '0', '--unixsocket', $sock, '--save', '', '--appendonly', 'no'],
    [1 => ['file', "$dir/plain.log", 'w'], 2 => ['file', "$dir/plain.log", 'a']], $pipes);
for ($i = 0; $i < 500 && !file_exists($sock); $i++) usleep(10000);
echo "server up: ", var_export(file_exists($sock), true), "\n";
$redis = fn (string ...$args) => trim((string) shell_exec(implode(' ', array_map('escapeshellarg', array_merge(['redis-cli', '-s', $sock], $args)))));
$code = '$n = 0; foreach (explode(",", getenv("RL_SUBJECTS")) as $s) { for ($i = 0; $i < 3; $i++) { $n += (int) ratelimit_acquire($s, 4, 60)->allowed; } } echo $n, "\n";';
$host = fn (string $form, string $subjects) => rl_run(
    ['ratelimit.redis_url' => "unix://$sock", 'ratelimit.redis_value_form' => $form], $code, ['env' => ['RL_SUBJECTS' => $subjects]]);
$r = $host('binary', 'made-binary');
echo "binary host, 3 calls on a new bucket: admitted ", trim($r['out']), trim($r['err']), "\n";
$r = $host('text', 'made-binary');
echo "text host, 3 more on it: admitted ", trim($r['out']), trim($r['err']), "\n";
$r = $host('text', 'made-text');
$r2 = $host('binary', 'made-text');
echo "text host then binary host on another: admitted ", trim($r['out']), " then ", trim($r2['out']), "\n";
$lengths = [];
foreach (explode("\n", $redis('--scan', '--pattern', '*}b:*')) as $k) {
    $lengths[] = (int) $redis('STRLEN', $k);
}
sort($lengths);
echo "bucket values: ", count($lengths), ", one of 57 bytes (binary): ", var_export(in_array(57, $lengths, true), true),
    ", one of text: ", var_export(count(array_filter($lengths, fn ($n) => $n !== 57)) === 1, true), "\n";
$r = rl_run(['ratelimit.redis_url' => "unix://$sock", 'ratelimit.redis_value_form' => 'bin'],
    'try { ratelimit_acquire("x", 4, 60); echo "decided\n"; } catch (RateLimit\Exception $e) { echo "threw: ", $e->getMessage(), "\n"; }');
echo str_contains($r['out'], 'invalid php.ini value for ratelimit.redis_value_form (expected text or binary') ? "bin: every call throws naming it\n" : "bin: " . $r['out'] . $r['err'];
proc_terminate($server);
proc_close($server);
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('redis_value_form_binary');
?>
--EXPECT--
server up: true
binary host, 3 calls on a new bucket: admitted 3
text host, 3 more on it: admitted 1
text host then binary host on another: admitted 3 then 1
bucket values: 2, one of 57 bytes (binary): true, one of text: true
bin: every call throws naming it
