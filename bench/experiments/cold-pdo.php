<?php
// The same as cold.php for the bare transaction of the PDO peers (BEGIN IMMEDIATE, SELECT,
// UPSERT, COMMIT; WAL, synchronous=NORMAL), on a file in a private directory it removes after:
//   taskset -c 1 php bench/experiments/cold-pdo.php 8
$mb = (int)($argv[1] ?? 8);
$big = str_repeat('x', $mb << 20);
$dir = sys_get_temp_dir() . '/ratelimit-cold-pdo-' . getmypid();
mkdir($dir, 0700);
$db = new PDO("sqlite:$dir/x.sqlite");
$db->exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
    CREATE TABLE bucket (id BLOB PRIMARY KEY, micro INTEGER, ts INTEGER) WITHOUT ROWID');
$sel = $db->prepare('SELECT micro, ts FROM bucket WHERE id = ?');
$up = $db->prepare('INSERT INTO bucket (id, micro, ts) VALUES (?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET micro = excluded.micro, ts = excluded.ts');
$one = function () use ($db, $sel, $up) {
    $db->exec('BEGIN IMMEDIATE');
    $sel->execute(['k']);
    $sel->fetchAll();
    $up->execute(['k', 5, hrtime(true)]);
    $db->exec('COMMIT');
};
$warm = $cold = [];
for ($i = 0; $i < 300; $i++) {
    $t = hrtime(true);
    $one();
    $warm[] = hrtime(true) - $t;
}
for ($i = 0; $i < 300; $i++) {
    md5($big);
    $t = hrtime(true);
    $one();
    $cold[] = hrtime(true) - $t;
}
$sel = $up = $one = $db = null;
array_map('unlink', glob("$dir/*"));
rmdir($dir);
sort($warm);
sort($cold);
printf("bare PDO transaction, caches evicted with %d MB: warm median %.1f us; cold median %.1f us, p90 %.1f us\n",
    $mb, $warm[150] / 1000, $cold[150] / 1000, $cold[270] / 1000);
