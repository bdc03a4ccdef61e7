--TEST--
ratelimit.request_replays: an admission with a $request_id is replayed at most that many times, then the retry is charged like any call (and remembered anew); 0: never replayed; an invalid value warns and every call throws naming it
--EXTENSIONS--
ratelimit
--INI--
ratelimit.request_replays=2
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

echo "request_replays=", ini_get('ratelimit.request_replays'), "\n";
$seen = [];
for ($i = 0; $i < 7; $i++) {
    $d = ratelimit_acquire('b', 10, 3600, 0, 'api', 1, 'k');
    $seen[] = ($d->replay ? 'replay' : 'charged') . "/$d->remaining";
}
echo implode(' ', $seen), "\n";
$s = ratelimit_stats();
echo "allowed={$s['allowed']} retries={$s['retries']}\n";

echo "-- request_replays=0: every retry is charged\n";
$r = rl_run(['ratelimit.request_replays' => '0'], 'for ($i = 0; $i < 3; $i++) { $d = ratelimit_acquire("c", 10, 3600, 0, "api", 1, "k"); echo ($d->replay ? "replay" : "charged"), "/", $d->remaining, " "; } echo "\n";');
echo trim($r['out']), "\n";

echo "-- invalid values warn, and every call throws naming the directive\n";
foreach (['-1', '1001', 'x'] as $bad) {
    $r = rl_run(['ratelimit.request_replays' => $bad, 'display_startup_errors' => '1', 'error_log' => ''],
        'try { ratelimit_acquire("c", 1, 60, request_id: "k"); echo "decided\n"; } catch (RateLimit\Exception $e) { echo "threw: ", $e->getMessage(), "\n"; }');
    $warned = str_contains($r['out'] . $r['err'], 'Invalid value') && str_contains($r['out'] . $r['err'], 'ratelimit.request_replays');
    echo var_export($bad, true), ": warned=", var_export($warned, true), " threw naming it: ",
        var_export(str_contains($r['out'], 'threw: ') && str_contains($r['out'], 'ratelimit.request_replays (expected'), true), "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('request_id_replays_bounded');
?>
--EXPECT--
request_replays=2
charged/9 replay/9 replay/9 charged/8 replay/8 replay/8 charged/7
allowed=3 retries=4
-- request_replays=0: every retry is charged
charged/9 charged/8 charged/7
-- invalid values warn, and every call throws naming the directive
'-1': warned=true threw naming it: true
'1001': warned=true threw naming it: true
'x': warned=true threw naming it: true
