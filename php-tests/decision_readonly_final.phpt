--TEST--
RateLimit\Decision is final and its properties cannot be written, unset or added
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

$rc = new ReflectionClass(RateLimit\Decision::class);
var_dump($rc->isFinal(), $rc->isInternal());

$d = ratelimit_acquire('ro', 5, 60);
$values = ['allowed' => false, 'reason' => 'x', 'limit' => 99, 'remaining' => 99,
    'retryAfter' => 1.5, 'resetAfter' => 1.5, 'lease' => 'x', 'scope' => 'x', 'source' => 'x'];
foreach ($values as $p => $v) {
    $before = $d->$p;
    try {
        $d->$p = $v;
        echo "$p: written\n";
    } catch (Throwable $e) {
        // ext-php-rs 0.16 refuses with \Exception ("No setter available for this property."),
        // where PHP's own readonly properties throw \Error: either is a refusal.
        echo "$p: refused\n";
    }
    try {
        unset($d->$p);
        echo "$p: unset\n";
    } catch (Throwable $e) {
        // refused
    }
    if ($d->$p !== $before) {
        echo "$p: CHANGED\n";
    }
}
try {
    $d->extra = 1;
    echo "dynamic property: added\n";
} catch (Error $e) {
    echo get_class($e), ": ", $e->getMessage(), "\n";
}
var_dump($d->allowed, $d->limit, $d->remaining);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('decision_readonly_final');
?>
--EXPECT--
bool(true)
bool(true)
allowed: refused
reason: refused
limit: refused
remaining: refused
retryAfter: refused
resetAfter: refused
lease: refused
scope: refused
source: refused
Error: Cannot create dynamic property RateLimit\Decision::$extra
bool(true)
int(5)
int(4)
