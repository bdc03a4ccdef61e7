--TEST--
phpinfo() shows a ratelimit section with the version, the database and the key file path, never the key
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-phpinfo/db.sqlite
ratelimit.key_file={TMP}/rl-phpt-phpinfo/secret.key
--FILE--
<?php
require __DIR__ . '/../_helpers.inc';
$dir = rl_test_dir();
$keyPath = ini_get('ratelimit.key_file');
$key = "K3y-Bytes-Never-Shown-0123456789";   // 32 bytes
file_put_contents($keyPath, $key);
chmod($keyPath, 0600);                  // a key is for its owner alone
ratelimit_acquire('x', 5, 60);           // the key is loaded

function info(): string { ob_start(); phpinfo(INFO_MODULES); return ob_get_clean(); }
function check(string $out, string $db, string $keyPath, string $key): void {
    // The module's section: from its heading line to the next heading.
    if (!preg_match('/^ratelimit\n(.*?)(?=\n\n[A-Za-z][A-Za-z0-9_ ]*\n\n|\z)/ms', $out, $m)) {
        echo "no ratelimit section\n";
        return;
    }
    // Its own rows, without the table of ini directives (which shows db_path and key_file anyway).
    $section = preg_replace('/^Directive => Local Value => Master Value.*\z/ms', '', $m[1]);
    $version = phpversion('ratelimit');
    echo "version ", preg_match('/^\d+\.\d+\.\d+/', (string)$version) ? 'looks like x.y.z' : var_export($version, true), ", shown: ", var_export(str_contains($section, $version), true), "\n";
    echo "database shown: ", var_export(str_contains($section, $db), true), "\n";
    echo "key file path shown: ", var_export(str_contains($section, $keyPath), true), "\n";
    $leaks = [];
    foreach (['raw' => $key, 'hex' => bin2hex($key), 'HEX' => strtoupper(bin2hex($key)), 'base64' => base64_encode($key), 'part' => 'Never-Shown'] as $form => $s) {
        if (str_contains($out, $s)) $leaks[] = $form;
    }
    echo "key bytes anywhere in phpinfo: ", $leaks ? implode(',', $leaks) : 'no', "\n";
}
echo "-- explicit key file\n";
check(info(), ini_get('ratelimit.db_path'), $keyPath, $key);

echo "-- default key file, before and after first use\n";
$code = 'ob_start(); phpinfo(INFO_MODULES); $a = ob_get_clean(); ratelimit_acquire("x", 5, 60);'
    . 'ob_start(); phpinfo(INFO_MODULES); $b = ob_get_clean(); echo json_encode([$a, $b]);';
$r = rl_run(['ratelimit.db_path' => "$dir/other.sqlite", 'ratelimit.key_file' => ''], $code, ['inherit' => false]);
[$before, $after] = json_decode($r['out'], true) ?? ['', ''];
check($before, "$dir/other.sqlite", "$dir/other.sqlite.key", "\0no key known\0");
$k = @file_get_contents("$dir/other.sqlite.key");
check($after, "$dir/other.sqlite", "$dir/other.sqlite.key", $k === false ? "\0no key known\0" : $k);
?>
--CLEAN--
<?php
require __DIR__ . '/../_helpers.inc';
rl_clean('phpinfo');
?>
--EXPECT--
-- explicit key file
version looks like x.y.z, shown: true
database shown: true
key file path shown: true
key bytes anywhere in phpinfo: no
-- default key file, before and after first use
version looks like x.y.z, shown: true
database shown: true
key file path shown: true
key bytes anywhere in phpinfo: no
version looks like x.y.z, shown: true
database shown: true
key file path shown: true
key bytes anywhere in phpinfo: no
