--TEST--
TypeErrors the extension words itself name the given value as PHP's own functions do on the running version ("bool given" up to 8.2, "true given" since 8.3)
--EXTENSIONS--
ratelimit
--INI--
ratelimit.db_path={TMP}/rl-phpt-errors_types_engine_wording/db.sqlite
--FILE--
<?php
declare(strict_types=1);
require __DIR__ . '/_helpers.inc';
rl_test_dir();

function type_error(callable $fn): string
{
    try {
        $fn();
    } catch (TypeError $e) {
        return $e->getMessage();
    }
    return 'no TypeError';
}
function given(string $message): string
{
    return preg_match('/, (\S+) given$/', $message, $m) ? $m[1] : "(no 'given' in: $message)";
}

echo "PHP's words for true and false: ", rl_engine_given(true) === (PHP_VERSION_ID >= 80300 ? 'true' : 'bool') ? 'as documented for this version' : 'UNEXPECTED ' . rl_engine_given(true), "\n";
foreach (['true' => true, 'false' => false, 'null' => null, 'int' => 7, 'float' => 1.5, 'array' => []] as $label => $v) {
    // ratelimit_release(RateLimit\Decision|string $lease): the extension writes this one itself.
    $ours = type_error(fn() => ratelimit_release($v));
    // method_exists(object|string $object_or_class): PHP's own union of a class and a string.
    $php = type_error(fn() => method_exists($v, 'x'));
    echo 'TypeError: ', rl_engine_wording($ours, $v), "\n";
    rl_check("  $label is named as method_exists() names it", given($ours) === given($php), [$ours, $php]);
    if ($v === null || is_int($v)) {
        continue; // valid for an ?int
    }
    // ratelimit_acquire(?int $limit): worded by the engine itself (zend_wrong_parameter_type_error).
    $engine = type_error(fn() => ratelimit_acquire('s', $v));
    $php_int = type_error(fn() => array_slice([], 0, $v));  // array_slice(?int $length)
    rl_check("  and as the engine names it for ?int \$limit", given($engine) === given($ours) && given($php_int) === given($ours), [$engine, $php_int]);
}
var_dump(ratelimit_stats()['allowed']);
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('errors_types_engine_wording');
?>
--EXPECT--
PHP's words for true and false: as documented for this version
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, <PHP's word for true> given
  true is named as method_exists() names it: ok
  and as the engine names it for ?int $limit: ok
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, <PHP's word for false> given
  false is named as method_exists() names it: ok
  and as the engine names it for ?int $limit: ok
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, null given
  null is named as method_exists() names it: ok
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, int given
  int is named as method_exists() names it: ok
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, float given
  float is named as method_exists() names it: ok
  and as the engine names it for ?int $limit: ok
TypeError: ratelimit_release(): Argument #1 ($lease) must be of type RateLimit\Decision|string, array given
  array is named as method_exists() names it: ok
  and as the engine names it for ?int $limit: ok
int(0)
