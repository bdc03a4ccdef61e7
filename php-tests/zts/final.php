<?php
// After the harness ended (module shutdown included), with the ZTS CLI on the same database:
// the totals check.php expects, the unfreed threads' counts included (written at module
// shutdown by their globals' destructor, on the main thread). Exit 1 on any difference.
$want = json_decode((string)file_get_contents($argv[1]), true);
if (!is_array($want)) {
    echo "final: no expectations in $argv[1]\n";
    exit(1);
}
$s = ratelimit_stats();
$bad = 0;
foreach ($want as $k => $v) {
    echo "final: $k {$s[$k]} (want $v)\n";
    $bad += $s[$k] !== $v ? 1 : 0;
}
exit($bad ? 1 : 0);
