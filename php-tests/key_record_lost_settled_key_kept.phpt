--TEST--
The store loses its key record (FLUSHALL, a Redis restarted without persistence, an evicted record; a lost row) while two processes of the right key and a stray process of another key run: the stray may record its key first, but the processes that had settled theirs record it again within a second, and the stray is refused from its next check on
--EXTENSIONS--
ratelimit
--INI--
ratelimit.key_file={TMP}/rl-phpt-key_record_lost_settled_key_kept/k.key
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();
foreach (['k.key', 'stray.key'] as $k) {
    file_put_contents("$dir/$k", random_bytes(32));
    chmod("$dir/$k", 0600);
}
$a = rl_worker();
$b = rl_worker();
$stray = rl_worker(['ratelimit.key_file' => "$dir/stray.key"]);
$short = fn(string $s) => str_starts_with($s, 'RateLimit\Exception') ? 'refused' : $s;
echo "before: ", rl_worker_cmd($a, 'a s 100 3600'), " ", rl_worker_cmd($b, 'a s 100 3600'), " stray ", $short(rl_worker_cmd($stray, 'a s 100 3600')), "\n";
rl_pause(1.1);
rl_forget_key_record();
// The stray's check comes first: it finds no record and records its own key.
echo "record lost, the stray first: ", $short(rl_worker_cmd($stray, 'a s 100 3600')), "\n";
echo "the settled processes: ", rl_worker_cmd($a, 'a s 100 3600'), " ", rl_worker_cmd($b, 'a s 100 3600'), "\n";
rl_pause(1.1);
echo "a check later: stray ", $short(rl_worker_cmd($stray, 'a s 100 3600')), ", the settled ",
    rl_worker_cmd($a, 'a s 100 3600'), " ", rl_worker_cmd($b, 'a s 100 3600'), "\n";
rl_pause(1.1);
echo "and after: stray ", $short(rl_worker_cmd($stray, 'a s 100 3600')), ", the settled ",
    rl_worker_cmd($a, 'a s 100 3600'), " ", rl_worker_cmd($b, 'a s 100 3600'), "\n";
// A process started now (a respawned worker) with the right key decides; with the stray's, not.
$r = rl_run([], 'echo ratelimit_acquire("s", 100, 3600)->reason;');
$s = rl_run(['ratelimit.key_file' => "$dir/stray.key"], 'try { ratelimit_acquire("s", 100, 3600); echo "decided"; } catch (RateLimit\Exception $e) { echo "refused"; }');
echo "new processes: right key {$r['out']}, stray key {$s['out']}\n";
$err = rl_worker_stop($a) . rl_worker_stop($b);
rl_worker_stop($stray);
echo "logged 'key recorded again': ", var_export(str_contains($err . @file_get_contents("$dir/php-errors.log"), 'key recorded again'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('key_record_lost_settled_key_kept');
?>
--EXPECT--
before: ok ok stray refused
record lost, the stray first: ok
the settled processes: ok ok
a check later: stray refused, the settled ok ok
and after: stray refused, the settled ok ok
new processes: right key ok, stray key refused
logged 'key recorded again': true
