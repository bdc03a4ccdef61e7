--TEST--
Trust: a database file (or -wal) of another user, one writable by others, one in a world-writable or someone else's directory is refused and left untouched; new files are 0600, 0660 in a setgid group-writable directory, and -wal/-shm follow the database's mode
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-trust_db_files/parent.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
file_put_contents("$dir/k.key", random_bytes(32));
chmod("$dir/k.key", 0600);

$probe = 'try { $d = ratelimit_acquire("Secret-Subject", 5, 60); echo "allowed=", var_export($d->allowed, true); }'
    . ' catch (RateLimit\Exception $e) { echo "RateLimit\\\\Exception: ", $e->getMessage(); }';
function probe(string $dir, string $db, string $extra = ''): void
{
    global $probe;
    $r = rl_run(['ratelimit.db_path' => $db, 'ratelimit.key_file' => "$dir/k.key"], $probe . $extra);
    echo str_replace($dir, 'DIR', trim($r['out'] . $r['err'])), "\n";
}
function sum(string $path): string
{
    clearstatcache();
    return md5_file($path) . ' ' . decoct(fileperms($path) & 07777) . ' ' . fileowner($path);
}
// A real SQLite file with a planted bucket table, made by another process (the sqlite3 CLI).
function planted(string $path): void
{
    exec(escapeshellarg(rl_sqlite3()) . ' ' . escapeshellarg($path) . ' "CREATE TABLE buckets(key BLOB PRIMARY KEY, tokens INTEGER); INSERT INTO buckets VALUES (x\'00\', 999999);"');
}

echo "-- a database file of another user (uid 65534), mode 0666\n";
planted("$dir/theirs.sqlite");
chmod("$dir/theirs.sqlite", 0666);
chown("$dir/theirs.sqlite", 65534);
$before = sum("$dir/theirs.sqlite");
probe($dir, "$dir/theirs.sqlite");
echo "untouched: ", var_export(sum("$dir/theirs.sqlite") === $before, true), ", no -wal: ", var_export(!file_exists("$dir/theirs.sqlite-wal"), true), "\n";

echo "-- our own file, but writable by others\n";
planted("$dir/open.sqlite");
chmod("$dir/open.sqlite", 0646);
$before = sum("$dir/open.sqlite");
probe($dir, "$dir/open.sqlite");
echo "untouched: ", var_export(sum("$dir/open.sqlite") === $before, true), "\n";

echo "-- a -wal of another user next to a database of ours\n";
planted("$dir/ours.sqlite");
file_put_contents("$dir/ours.sqlite-wal", '');
chown("$dir/ours.sqlite-wal", 65534);
$before = sum("$dir/ours.sqlite") . sum("$dir/ours.sqlite-wal");
probe($dir, "$dir/ours.sqlite");
echo "untouched: ", var_export(sum("$dir/ours.sqlite") . sum("$dir/ours.sqlite-wal") === $before, true), "\n";

echo "-- a world-writable directory (like /tmp), sticky\n";
mkdir("$dir/pub");
chmod("$dir/pub", 01777);
probe($dir, "$dir/pub/rl.sqlite");
echo "nothing created: ", var_export(scandir("$dir/pub") === ['.', '..'], true), "\n";

echo "-- a directory of another user\n";
mkdir("$dir/theirs");
chown("$dir/theirs", 65534);
probe($dir, "$dir/theirs/rl.sqlite");
echo "nothing created: ", var_export(scandir("$dir/theirs") === ['.', '..'], true), "\n";

echo "-- new files: 0600 whatever the umask; -wal and -shm the same\n";
$modes = '; clearstatcache(); foreach (["", "-wal", "-shm"] as $s) printf("; db%s %o", $s, fileperms(ini_get("ratelimit.db_path") . $s) & 07777);';
mkdir("$dir/mine", 0700);
probe($dir, "$dir/mine/rl.sqlite", $modes);
$r = rl_run(['ratelimit.db_path' => "$dir/mine2/rl.sqlite", 'ratelimit.key_file' => "$dir/k.key"], 'mkdir(dirname(ini_get("ratelimit.db_path")), 0700); umask(0);' . $probe . $modes);
echo "under umask 0: ", trim($r['out'] . $r['err']), "\n";

echo "-- a group-shared directory (setgid, group-writable: 2770): 0660\n";
mkdir("$dir/shared");
chmod("$dir/shared", 02770);
probe($dir, "$dir/shared/rl.sqlite", $modes);

echo "-- a -wal left with another mode gets the database's\n";
exec(escapeshellarg(rl_sqlite3()) . ' ' . escapeshellarg("$dir/legacy.sqlite") . ' "PRAGMA journal_mode=WAL;" > /dev/null');
chmod("$dir/legacy.sqlite", 0600);
// An older version, or another tool, left these open to the group.
$r = rl_run(['ratelimit.db_path' => "$dir/legacy.sqlite", 'ratelimit.key_file' => "$dir/k.key"],
    'touch(ini_get("ratelimit.db_path") . "-wal"); chmod(ini_get("ratelimit.db_path") . "-wal", 0640);' . $probe . $modes);
echo trim($r['out'] . $r['err']), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('trust_db_files');
?>
--EXPECTF--
-- a database file of another user (uid 65534), mode 0666
RateLimit\Exception: ratelimit: refusing DIR/theirs.sqlite: the database is owned by uid 65534, not by the effective user (uid %d) or root (its owner could read and rewrite every bucket), and has mode 0666 (writable by others), wanted 0600, or 0660 in a group-shared directory
untouched: true, no -wal: true
-- our own file, but writable by others
RateLimit\Exception: ratelimit: refusing DIR/open.sqlite: the database has mode 0646 (writable by others), wanted 0600, or 0660 in a group-shared directory
untouched: true
-- a -wal of another user next to a database of ours
RateLimit\Exception: ratelimit: refusing DIR/ours.sqlite-wal: the database's -wal file is owned by uid 65534, not by the effective user (uid %d) or root (its owner could read and rewrite every bucket)
untouched: true
-- a world-writable directory (like /tmp), sticky
RateLimit\Exception: ratelimit: refusing DIR/pub/rl.sqlite: its directory DIR/pub has mode 1777 (writable by every user: anyone could plant a file or a link there); leave ratelimit.db_path empty to use <temp dir>/php-ratelimit-%d/, or use a directory of your own
nothing created: true
-- a directory of another user
RateLimit\Exception: ratelimit: refusing DIR/theirs/rl.sqlite: its directory DIR/theirs is owned by uid 65534, not by the effective user (uid %d) or root (that user could replace the files in it)
nothing created: true
-- new files: 0600 whatever the umask; -wal and -shm the same
allowed=true; db 600; db-wal 600; db-shm 600
under umask 0: allowed=true; db 600; db-wal 600; db-shm 600
-- a group-shared directory (setgid, group-writable: 2770): 0660
allowed=true; db 660; db-wal 660; db-shm 660
-- a -wal left with another mode gets the database's
allowed=true; db 600; db-wal 600; db-shm 600
