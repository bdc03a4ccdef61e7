--TEST--
Key file: a ratelimit.key_file that does not exist is a RateLimit\Exception naming the path (never the subject); nothing allowed, nothing created
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-key_file_missing_error/db.sqlite
ratelimit.key_file={TMP}/rl-phpt-key_file_missing_error/missing.key
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
rl_test_dir();
$path = ini_get('ratelimit.key_file');

$calls = [
    'acquire' => fn() => ratelimit_acquire('Secret-Subject-4711', 5, 60),
    'acquire again' => fn() => ratelimit_acquire('Secret-Subject-4711', 5, 60, 1),
    'peek' => fn() => ratelimit_peek('Secret-Subject-4711', 5, 60),
    'reset' => fn() => ratelimit_reset('Secret-Subject-4711'),
];
foreach ($calls as $name => $fn) {
    try {
        $d = $fn();
        echo "$name: no exception (", var_export(is_object($d) ? $d->allowed : $d, true), ")\n";
    } catch (RateLimit\Exception $e) {
        echo "$name: ", get_class($e), ", RuntimeException: ", var_export($e instanceof RuntimeException, true),
            ", names the path: ", var_export(str_contains($e->getMessage(), $path), true),
            ", names the subject: ", var_export(str_contains($e->getMessage(), 'Secret-Subject'), true), "\n";
    }
}
clearstatcache();
echo "key file created: ", var_export(file_exists($path), true), "\n";
echo "default key created: ", var_export(file_exists(ini_get('ratelimit.db_path') . '.key'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('key_file_missing_error');
?>
--EXPECT--
acquire: RateLimit\Exception, RuntimeException: true, names the path: true, names the subject: false
acquire again: RateLimit\Exception, RuntimeException: true, names the path: true, names the subject: false
peek: RateLimit\Exception, RuntimeException: true, names the path: true, names the subject: false
reset: RateLimit\Exception, RuntimeException: true, names the path: true, names the subject: false
key file created: false
default key created: false
