--TEST--
Trust: the default location <temp dir>/php-ratelimit-<euid>/ is created 0700 (umask 0277 or 0), by racing first uses, then reused; one that is open, a link, someone else's, or under a non-sticky world-writable temp dir is refused, naming the path
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-trust_default_dir/parent.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();

// Children with no ratelimit.db_path and their own temp dir (TMPDIR), like a 1777 /tmp.
function child(string $tmp, string $code): string
{
    $r = rl_run([], $code, ['inherit' => false, 'env' => ['TMPDIR' => $tmp]]);
    return trim($r['out'] . $r['err']);
}
$probe = 'try { $d = ratelimit_acquire("x", 100, 60); echo $d->allowed ? "allowed" : "denied", " remaining=$d->remaining"; }'
    . ' catch (RateLimit\Exception $e) { echo "RateLimit\\\\Exception: ", $e->getMessage(); }';
function modes(string $d): string
{
    clearstatcache();
    $out = [];
    foreach (array_diff(scandir($d), ['.', '..']) as $f) {
        if (preg_match('/-(wal|shm|journal)$/', $f)) continue;   // SQLite's, gone at close
        $out[] = $f . ' ' . decoct(fileperms("$d/$f") & 07777);
    }
    return implode(', ', $out);
}

echo "-- first use under umask 0277, then under umask 0\n";
$tmp = "$dir/tmp1";
mkdir($tmp);
chmod($tmp, 01777);
$user = rl_default_dir($tmp);
echo child($tmp, 'umask(0277);' . $probe), "\n";
clearstatcache();
printf("%s: mode %o, owner uid %d = euid: %s\n", str_replace($dir, 'DIR', $user), fileperms($user) & 07777, fileowner($user), var_export(fileowner($user) === rl_euid(), true));
echo "in it: ", modes($user), "\n";
$ino = fileinode($user);
// While this child holds the database open, its -wal and -shm exist: 0600 as well.
echo child($tmp, 'umask(0);' . $probe . '; $u = getenv("TMPDIR") . "/php-ratelimit-' . rl_euid() . '"; clearstatcache();'
    . ' foreach (["-wal", "-shm"] as $s) printf("; %s %o", $s, fileperms("$u/php-ratelimit.sqlite$s") & 07777);'), "\n";
clearstatcache();
echo "reused (same inode): ", var_export(fileinode($user) === $ino, true), ", in it: ", modes($user), "\n";

echo "-- 12 processes racing on the first use of a fresh temp dir\n";
$tmp = "$dir/tmp2";
mkdir($tmp);
chmod($tmp, 01777);
$code = 'echo "ready\n"; fflush(STDOUT); fgets(STDIN);' . $probe . ' echo "\n";';
$children = [];
for ($i = 0; $i < 12; $i++) {
    $children[] = rl_spawn([], $code, ['inherit' => false, 'env' => ['TMPDIR' => $tmp]]);
}
foreach ($children as [$proc, $pipes]) {
    rl_read_line($pipes[1], 10);
}
foreach ($children as [$proc, $pipes]) {
    fwrite($pipes[0], "go\n");
}
$outcomes = [];
foreach ($children as [$proc, $pipes]) {
    fclose($pipes[0]);
    stream_set_blocking($pipes[1], true);
    $line = trim(stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]));
    $outcomes[] = preg_replace('/ remaining=\d+/', '', $line);
    fclose($pipes[1]);
    fclose($pipes[2]);
    proc_close($proc);
}
echo "outcomes: ", json_encode(array_count_values($outcomes)), "\n";
$user = rl_default_dir($tmp);
clearstatcache();
printf("directory mode %o; in the temp dir: %s; in it: %s\n", fileperms($user) & 07777, implode(' ', array_diff(scandir($tmp), ['.', '..'])), modes($user));
echo "one bucket, 12 tokens taken: ", child($tmp, 'echo ratelimit_peek("x", 100, 60)->remaining;'), "\n";

echo "-- refused, each time naming the path, and nothing written into the directory\n";
$cases = [
    'mode 0755' => function (string $u) { mkdir($u); chmod($u, 0755); },
    'mode 0750' => function (string $u) { mkdir($u); chmod($u, 0750); },
    'a symbolic link to a 0700 directory' => function (string $u) { mkdir("$u.real"); chmod("$u.real", 0700); symlink("$u.real", $u); },
    'owned by uid 65534' => function (string $u) { mkdir($u); chmod($u, 0700); chown($u, 65534); },
    'a regular file' => function (string $u) { file_put_contents($u, 'x'); },
];
$n = 0;
foreach ($cases as $name => $plant) {
    $tmp = "$dir/tmp-case" . ++$n;
    mkdir($tmp);
    chmod($tmp, 01777);
    $user = rl_default_dir($tmp);
    $plant($user);
    $before = shell_exec('ls -laR ' . escapeshellarg($tmp) . ' | md5sum');
    echo "$name: ", str_replace($dir, 'DIR', child($tmp, $probe)), "\n";
    echo "  unchanged: ", var_export(shell_exec('ls -laR ' . escapeshellarg($tmp) . ' | md5sum') === $before, true), "\n";
}
echo "a temp dir writable by all without the sticky bit: ";
$tmp = "$dir/tmp-nosticky";
mkdir($tmp);
chmod($tmp, 0777);
echo str_replace($dir, 'DIR', child($tmp, $probe)), "\n";
echo "  nothing created: ", var_export(scandir($tmp) === ['.', '..'], true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('trust_default_dir');
?>
--EXPECTF--
-- first use under umask 0277, then under umask 0
allowed remaining=99
DIR/tmp1/php-ratelimit-%d: mode 700, owner uid %d = euid: true
in it: php-ratelimit.sqlite 600, php-ratelimit.sqlite.key 600, php-ratelimit.sqlite.queue 600
allowed remaining=98; -wal 600; -shm 600
reused (same inode): true, in it: php-ratelimit.sqlite 600, php-ratelimit.sqlite.key 600, php-ratelimit.sqlite.queue 600
-- 12 processes racing on the first use of a fresh temp dir
outcomes: {"allowed":12}
directory mode 700; in the temp dir: php-ratelimit-%d; in it: php-ratelimit.sqlite 600, php-ratelimit.sqlite.key 600, php-ratelimit.sqlite.queue 600
one bucket, 12 tokens taken: 88
-- refused, each time naming the path, and nothing written into the directory
mode 0755: RateLimit\Exception: ratelimit: refusing DIR/tmp-case1/php-ratelimit-%d: the per-user directory has mode 0755 (readable and searchable by group and others), wanted 0700
  unchanged: true
mode 0750: RateLimit\Exception: ratelimit: refusing DIR/tmp-case2/php-ratelimit-%d: the per-user directory has mode 0750 (readable and searchable by group), wanted 0700
  unchanged: true
a symbolic link to a 0700 directory: RateLimit\Exception: ratelimit: refusing DIR/tmp-case3/php-ratelimit-%d: the per-user directory is a symbolic link, wanted a directory of mode 0700 owned by uid %d
  unchanged: true
owned by uid 65534: RateLimit\Exception: ratelimit: refusing DIR/tmp-case4/php-ratelimit-%d: the per-user directory is owned by uid 65534, not by the effective user (uid %d)
  unchanged: true
a regular file: RateLimit\Exception: ratelimit: refusing DIR/tmp-case5/php-ratelimit-%d: the per-user directory is a regular file, wanted a directory of mode 0700 owned by uid %d
  unchanged: true
a temp dir writable by all without the sticky bit: RateLimit\Exception: ratelimit: refusing DIR/tmp-nosticky: the temp directory has mode 0777 (writable by every user, without the sticky bit)
  nothing created: true
