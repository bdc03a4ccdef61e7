--TEST--
A database path that cannot be created is a RateLimit\Exception naming the path, for every function that needs it; nothing is allowed
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-db_path_not_creatable/no-such-dir/db.sqlite
ratelimit.key_file={TMP}/rl-phpt-db_path_not_creatable/k.key
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = sys_get_temp_dir() . '/rl-phpt-db_path_not_creatable';
rl_rmtree($dir);
mkdir($dir, 0700);
file_put_contents("$dir/k.key", random_bytes(32));
chmod("$dir/k.key", 0600);
$db = ini_get('ratelimit.db_path');

$calls = [
    'acquire' => fn() => ratelimit_acquire('Private-Subject-1', 5, 60),
    'peek' => fn() => ratelimit_peek('Private-Subject-1', 5, 60),
    'reset' => fn() => ratelimit_reset('Private-Subject-1'),
    'release' => fn() => ratelimit_release('1' . str_repeat('a', 96)),
    'stats' => fn() => ratelimit_stats(),
];
foreach ($calls as $name => $fn) {
    try {
        $v = $fn();
        echo "$name: no exception: ", json_encode(is_object($v) ? $v->allowed : $v), "\n";
    } catch (RateLimit\Exception $e) {
        echo "$name: RateLimit\\Exception, names the path: ", var_export(str_contains($e->getMessage(), $db), true),
            ", names the subject: ", var_export(str_contains($e->getMessage(), 'Private-Subject'), true), "\n";
    }
}
echo "directory created: ", var_export(is_dir(dirname($db)), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('db_path_not_creatable');
?>
--EXPECT--
acquire: RateLimit\Exception, names the path: true, names the subject: false
peek: RateLimit\Exception, names the path: true, names the subject: false
reset: RateLimit\Exception, names the path: true, names the subject: false
release: RateLimit\Exception, names the path: true, names the subject: false
stats: RateLimit\Exception, names the path: true, names the subject: false
directory created: false
