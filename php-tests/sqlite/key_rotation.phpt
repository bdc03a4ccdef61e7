--TEST--
Key rotation: with ratelimit.key_file_previous, a client that spent its tokens under the old key is still limited under the new one (its bucket moved, keys_migrated counted); without it, a replaced key starts every client afresh
--EXTENSIONS--
ratelimit
--INI--
ratelimit.key_file={TMP}/rl-phpt-key_rotation/old.key
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
// Moving buckets is SQLite's: on Redis Cluster a bucket's name under the previous key lives in
// another slot, out of reach of the decision's script (see docs/redis.md).
$dir = rl_isolate('sqlite');
foreach (['old', 'new'] as $k) {
    file_put_contents("$dir/$k.key", random_bytes(32));
    chmod("$dir/$k.key", 0600);
}
for ($i = 0; $i < 3; $i++) ratelimit_acquire('Rotated-Client', 3, 86400);
echo "old key, 4th call: ", ratelimit_acquire('Rotated-Client', 3, 86400)->reason, "\n";

// The procedure: a new key file, the old one as key_file_previous, reload (a new process).
$probe = '$d = ratelimit_acquire("Rotated-Client", 3, 86400); $s = ratelimit_stats();'
    . ' echo $d->reason, " keys_migrated=", $s["keys_migrated"], "\n";';
$r = rl_run(['ratelimit.key_file' => "$dir/new.key", 'ratelimit.key_file_previous' => "$dir/old.key"], $probe);
echo "new key with the previous one: ", trim($r['out']), "\n";
echo "  logged: ", trim(str_replace($dir, 'DIR', $r['err'])), "\n";
$r = rl_run(['ratelimit.key_file' => "$dir/new.key"], $probe);
echo "new key alone (previous removed after the longest per): ", trim($r['out']), "\n";

// Without a previous key: the file replaced in place, and the client starts afresh.
file_put_contents("$dir/new.key", random_bytes(32));
$r = rl_run(['ratelimit.key_file' => "$dir/new.key"], $probe);
echo "a replaced key without key_file_previous: ", trim($r['out']), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('key_rotation');
?>
--EXPECT--
old key, 4th call: rate
new key with the previous one: rate keys_migrated=1
  logged: ratelimit: key changed, now deciding with the new key (DIR/new.key)
ratelimit: key rotation: moving buckets from the previous key (DIR/old.key)
new key alone (previous removed after the longest per): rate keys_migrated=1
a replaced key without key_file_previous: ok keys_migrated=1
