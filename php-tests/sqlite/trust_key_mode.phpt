--TEST--
Trust: a key file open to group or others, not ours, not a regular file, or a link where none is allowed, is a RateLimit\Exception with the mode found and wanted; 0600/0400 work; a configured link is followed outside world-writable directories
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-trust_key_mode/db.sqlite
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$key = "$dir/k.key";
$bytes = random_bytes(32);
file_put_contents($key, $bytes);

$probe = 'try { $d = ratelimit_acquire("Secret-Subject", 5, 60); echo "allowed=", var_export($d->allowed, true), "\n"; }'
    . ' catch (RateLimit\Exception $e) { echo "RateLimit\\\\Exception: ", $e->getMessage(), "\n"; }';
function probe(string $dir, array $ini): void
{
    global $probe;
    $r = rl_run($ini, $probe);
    $out = str_replace($dir, 'DIR', $r['out'] . $r['err']);
    echo $out;
    if (str_contains($out, 'Secret-Subject')) echo "the subject was named!\n";
}

foreach ([0640, 0644, 0604, 0660, 0620, 0602, 0666, 0700, 0600, 0400] as $mode) {
    chmod($key, $mode);
    printf("%04o: ", $mode);
    probe($dir, ['ratelimit.key_file' => $key]);
}
chmod($key, 0600);

echo "-- owned by another user (uid 65534), mode 0644\n";
copy($key, "$dir/theirs.key");
chmod("$dir/theirs.key", 0644);
chown("$dir/theirs.key", 65534);
probe($dir, ['ratelimit.key_file' => "$dir/theirs.key"]);

echo "-- a FIFO as the key (no wait)\n";
exec('mkfifo -m 0600 ' . escapeshellarg("$dir/fifo.key"));
probe($dir, ['ratelimit.key_file' => "$dir/fifo.key"]);

echo "-- a configured key_file that is a link, in a directory of ours: followed\n";
symlink($key, "$dir/link.key");
probe($dir, ['ratelimit.key_file' => "$dir/link.key"]);

echo "-- the same link in a world-writable directory: refused\n";
mkdir("$dir/pub");
chmod("$dir/pub", 01777);
symlink($key, "$dir/pub/link.key");
probe($dir, ['ratelimit.key_file' => "$dir/pub/link.key"]);

echo "-- the default key (next to the database) as a link: refused\n";
symlink($key, "$dir/other.sqlite.key");
probe($dir, ['ratelimit.db_path' => "$dir/other.sqlite", 'ratelimit.key_file' => '']);

clearstatcache();
echo "key unchanged: ", var_export(file_get_contents($key) === $bytes, true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('trust_key_mode');
?>
--EXPECTF--
0640: RateLimit\Exception: ratelimit: refusing DIR/k.key: the key file has mode 0640 (readable by group), wanted 0600 or stricter
0644: RateLimit\Exception: ratelimit: refusing DIR/k.key: the key file has mode 0644 (readable by group and others), wanted 0600 or stricter
0604: RateLimit\Exception: ratelimit: refusing DIR/k.key: the key file has mode 0604 (readable by others), wanted 0600 or stricter
0660: RateLimit\Exception: ratelimit: refusing DIR/k.key: the key file has mode 0660 (readable and writable by group), wanted 0600 or stricter
0620: RateLimit\Exception: ratelimit: refusing DIR/k.key: the key file has mode 0620 (writable by group), wanted 0600 or stricter
0602: RateLimit\Exception: ratelimit: refusing DIR/k.key: the key file has mode 0602 (writable by others), wanted 0600 or stricter
0666: RateLimit\Exception: ratelimit: refusing DIR/k.key: the key file has mode 0666 (readable and writable by group and others), wanted 0600 or stricter
0700: allowed=true
0600: allowed=true
0400: allowed=true
-- owned by another user (uid 65534), mode 0644
RateLimit\Exception: ratelimit: refusing DIR/theirs.key: the key file is owned by uid 65534, not by the effective user (uid %d) or root (its owner knows the key), and has mode 0644 (readable by group and others), wanted 0600 or stricter
-- a FIFO as the key (no wait)
RateLimit\Exception: ratelimit: refusing DIR/fifo.key: the key file is a FIFO, wanted a regular file
-- a configured key_file that is a link, in a directory of ours: followed
allowed=true
-- the same link in a world-writable directory: refused
RateLimit\Exception: ratelimit: refusing DIR/pub/link.key: the key file is a symbolic link in DIR/pub, a directory every user can write to (mode 1777): the link may be someone else's; point ratelimit.key_file at the file itself
-- the default key (next to the database) as a link: refused
RateLimit\Exception: ratelimit: refusing DIR/other.sqlite.key: the key file is a symbolic link: the default key (next to the database) never is one
key unchanged: true
