--TEST--
A ratelimit.db_path naming a directory ("/dir/db.sqlite/", a mistyped trailing slash) is a startup warning naming the directive and every call a RateLimit\Exception naming it, as a relative path is: never a database opened without its queue, breaker or default key
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();
$code = 'try { ratelimit_acquire("Private-Subject", 5, 60); echo "acquire: decided\n"; } catch (RateLimit\Exception $e) { echo "acquire: ", $e->getMessage(), "\n"; }';
foreach (["$dir/db.sqlite/", "$dir/db.sqlite/."] as $path) {
    $r = rl_run(['ratelimit.db_path' => $path, 'display_startup_errors' => '1', 'error_log' => ''], $code);
    $all = $r['out'] . $r['err'];
    echo str_replace($dir, '{DIR}', $path), ": startup warning names it: ",
        var_export((bool) preg_match('/Warning.*Invalid value.*ratelimit\.db_path \(expected an absolute path/', $all), true), "\n";
    preg_match('/^acquire: (.*)$/m', $r['out'], $m);
    echo "  acquire throws naming it: ", var_export(str_contains($m[1] ?? '', 'ratelimit.db_path (expected an absolute path'), true), "\n";
}
echo "files made: ", count(array_diff(scandir($dir), ['.', '..', 'php-errors.log', 'redis.key'])), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('paths_naming_a_directory_refused');
?>
--EXPECT--
{DIR}/db.sqlite/: startup warning names it: true
  acquire throws naming it: true
{DIR}/db.sqlite/.: startup warning names it: true
  acquire throws naming it: true
files made: 0
