--TEST--
Trust: a symbolic link at the database path, on the way to it, or as its -wal is refused (RateLimit\Exception naming the path); the file it points to is not touched
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-trust_db_symlink/rl.sqlite
ratelimit.key_file={TMP}/rl-phpt-trust_db_symlink/k.key
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
file_put_contents("$dir/k.key", random_bytes(32));
chmod("$dir/k.key", 0600);
// An application's own SQLite database, made by another process (the sqlite3 CLI).
$app = "$dir/app.sqlite";
exec(escapeshellarg(rl_sqlite3()) . ' ' . escapeshellarg($app) . " \"CREATE TABLE orders(id INTEGER PRIMARY KEY, total INTEGER); INSERT INTO orders VALUES (1, 42);\"", $o, $rc);
$before = md5_file($app);
$listing = fn() => implode(' ', array_diff(scandir($dir), ['.', '..']));
echo "before: ", $listing(), "\n";

function refused(string $dir, array $ini): void
{
    $r = rl_run($ini, 'try { ratelimit_acquire("Secret-Subject", 5, 60); echo "no exception\n"; }'
        . ' catch (RateLimit\Exception $e) { echo "RateLimit\\\\Exception: ", $e->getMessage(), "\n"; }');
    echo str_replace($dir, 'DIR', $r['out'] . $r['err']);
}

echo "-- a link at the database path\n";
symlink($app, "$dir/rl.sqlite");
refused($dir, []);
echo "-- the same link, in this process\n";
try {
    ratelimit_acquire('Secret-Subject', 5, 60);
    echo "no exception\n";
} catch (RateLimit\Exception $e) {
    echo "RateLimit\\Exception naming the path: ", var_export(str_contains($e->getMessage(), "$dir/rl.sqlite"), true), "\n";
}

echo "-- a link to a directory on the way\n";
mkdir("$dir/real", 0700);
symlink("$dir/real", "$dir/via");
refused($dir, ['ratelimit.db_path' => "$dir/via/rl.sqlite"]);

echo "-- a link as the database's -wal\n";
symlink($app, "$dir/other.sqlite-wal");
refused($dir, ['ratelimit.db_path' => "$dir/other.sqlite"]);

clearstatcache();
echo "target unchanged: ", var_export(md5_file($app) === $before, true), "\n";
echo "after: ", $listing(), "\n";
echo "real/ empty: ", var_export(scandir("$dir/real") === ['.', '..'], true), "\n";
exec(escapeshellarg(rl_sqlite3()) . ' ' . escapeshellarg($app) . ' ".tables"', $tables);
echo "tables in the target: ", implode(' ', preg_split('/\s+/', trim(implode(' ', $tables)))), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('trust_db_symlink');
?>
--EXPECT--
before: app.sqlite k.key
-- a link at the database path
RateLimit\Exception: ratelimit: refusing DIR/rl.sqlite: the database is a symbolic link (someone else's link could send our writes into another file; the database is opened with SQLITE_OPEN_NOFOLLOW)
-- the same link, in this process
RateLimit\Exception naming the path: true
-- a link to a directory on the way
RateLimit\Exception: ratelimit: refusing DIR/via/rl.sqlite: DIR/via on the path is a symbolic link, and the database is opened without following links (SQLITE_OPEN_NOFOLLOW): use the real path DIR/real/rl.sqlite
-- a link as the database's -wal
RateLimit\Exception: ratelimit: refusing DIR/other.sqlite-wal: the database's -wal file is a symbolic link (someone else's link could send our writes into another file; the database is opened with SQLITE_OPEN_NOFOLLOW)
target unchanged: true
after: app.sqlite k.key other.sqlite-wal real rl.sqlite via
real/ empty: true
tables in the target: orders
