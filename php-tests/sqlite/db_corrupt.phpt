--TEST--
A corrupt database file is a RateLimit\Exception naming the path; nothing is allowed and the file is not replaced
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-db_corrupt/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
rl_test_dir();
$db = ini_get('ratelimit.db_path');
$junk = str_repeat("this is not an SQLite database\n", 200);
file_put_contents($db, $junk);

foreach (['acquire' => fn() => ratelimit_acquire('s', 5, 60), 'peek' => fn() => ratelimit_peek('s', 5, 60), 'stats' => fn() => ratelimit_stats()] as $name => $fn) {
    try {
        $v = $fn();
        echo "$name: no exception: ", json_encode(is_object($v) ? $v->allowed : $v), "\n";
    } catch (RateLimit\Exception $e) {
        echo "$name: RateLimit\\Exception, names the path: ", var_export(str_contains($e->getMessage(), $db), true), "\n";
    }
}
echo "file untouched: ", var_export(file_get_contents($db) === $junk, true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('db_corrupt');
?>
--EXPECT--
acquire: RateLimit\Exception, names the path: true
peek: RateLimit\Exception, names the path: true
stats: RateLimit\Exception, names the path: true
file untouched: true
