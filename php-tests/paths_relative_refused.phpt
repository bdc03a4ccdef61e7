--TEST--
A relative ratelimit.db_path, key_file or key_file_previous (resolved against each process's working directory, it would give two processes two files and one limit split in two) is a startup warning naming the directive, and every call a RateLimit\Exception naming it; no file is made
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
$dir = rl_isolate();
mkdir("$dir/cwd", 0700);
chdir("$dir/cwd");
$code = 'foreach (["acquire" => fn() => ratelimit_acquire("Private-Subject", 5, 60), "stats" => fn() => ratelimit_stats()] as $n => $f) {'
    . ' try { $f(); echo "$n: decided\n"; } catch (RateLimit\Exception $e) { echo "$n: ", $e->getMessage(), "\n"; } }';
foreach (['ratelimit.db_path' => 'rl.sqlite', 'ratelimit.key_file' => 'keys/k', 'ratelimit.key_file_previous' => './k.previous'] as $name => $relative) {
    $r = rl_run([$name => $relative, 'display_startup_errors' => '1', 'error_log' => ''], $code);
    $all = $r['out'] . $r['err'];
    echo "$name=$relative: startup warning names it: ",
        var_export((bool) preg_match('/Warning.*Invalid value.*' . preg_quote($name, '/') . ' \(expected an absolute path/', $all), true), "\n";
    foreach (['acquire', 'stats'] as $call) {
        preg_match("/^$call: (.*)$/m", $r['out'], $m);
        $msg = $m[1] ?? '(no line)';
        echo "  $call: throws naming it: ", var_export(str_contains($msg, "$name (expected an absolute path"), true),
            ", names the subject: ", var_export(str_contains($msg, 'Private-Subject'), true), "\n";
    }
}
echo "files made in the working directory: ", count(array_diff(scandir("$dir/cwd"), ['.', '..'])), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('paths_relative_refused');
?>
--EXPECT--
ratelimit.db_path=rl.sqlite: startup warning names it: true
  acquire: throws naming it: true, names the subject: false
  stats: throws naming it: true, names the subject: false
ratelimit.key_file=keys/k: startup warning names it: true
  acquire: throws naming it: true, names the subject: false
  stats: throws naming it: true, names the subject: false
ratelimit.key_file_previous=./k.previous: startup warning names it: true
  acquire: throws naming it: true, names the subject: false
  stats: throws naming it: true, names the subject: false
files made in the working directory: 0
