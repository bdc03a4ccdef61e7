--TEST--
RateLimit\Exception extends RuntimeException and can be constructed and caught from PHP
--EXTENSIONS--
ratelimit
--FILE--
<?php
require_once __DIR__ . '/_helpers.inc';
rl_isolate();
$rc = new ReflectionClass(RateLimit\Exception::class);
var_dump($rc->getParentClass()->getName(), $rc->isFinal(), $rc->isAbstract());
$e = new RateLimit\Exception('boom', 7);
var_dump($e instanceof RuntimeException, $e->getMessage(), $e->getCode());
try {
    throw new RateLimit\Exception('thrown');
} catch (RuntimeException $caught) {
    echo get_class($caught), ': ', $caught->getMessage(), "\n";
}
class Sub extends RateLimit\Exception {}
var_dump((new Sub('s')) instanceof RateLimit\Exception);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('exception_class');
?>
--EXPECT--
string(16) "RuntimeException"
bool(false)
bool(false)
bool(true)
string(4) "boom"
int(7)
RateLimit\Exception: thrown
bool(true)
