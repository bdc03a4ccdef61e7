--TEST--
RateLimit\Decision: every field has its documented type, for an allowed and a denied decision
--EXTENSIONS--
ratelimit
--FILE--
<?php
require __DIR__ . '/_helpers.inc';
rl_isolate();

function show(RateLimit\Decision $d): void {
    foreach (['allowed', 'reason', 'limit', 'remaining', 'retryAfter', 'resetAfter', 'lease', 'scope', 'replay'] as $p) {
        echo "  $p: ", get_debug_type($d->$p), "\n";
    }
}
echo "allowed with lease:\n";
$a = ratelimit_acquire('fields', 2, 10, 1, 'api');
show($a);
var_dump(preg_match('/^1[0-9a-f]{96}$/', $a->lease), $a->scope, $a->reason);

echo "denied (inflight):\n";
$b = ratelimit_acquire('fields', 2, 10, 1, 'api');
show($b);
var_dump($b->allowed, $b->reason);

echo "denied (rate):\n";
ratelimit_release($a);
ratelimit_acquire('fields', 2, 10, 0, 'api');
$c = ratelimit_acquire('fields', 2, 10, 0, 'api');
show($c);
var_dump($c->allowed, $c->reason, $c->remaining);

echo "peek:\n";
$p = ratelimit_peek('other', 2, 10, 'api');
show($p);

// The properties are declared (Reflection, property_exists, isset) and nothing else is.
$rc = new ReflectionClass(RateLimit\Decision::class);
$names = array_map(fn($p) => $p->getName(), $rc->getProperties());
sort($names);
echo implode(',', $names), "\n";
var_dump(property_exists($a, 'retryAfter'), isset($a->lease), isset($b->lease), isset($a->nope));
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('decision_fields');
?>
--EXPECT--
allowed with lease:
  allowed: bool
  reason: string
  limit: int
  remaining: int
  retryAfter: float
  resetAfter: float
  lease: string
  scope: string
  replay: bool
int(1)
string(3) "api"
string(2) "ok"
denied (inflight):
  allowed: bool
  reason: string
  limit: int
  remaining: int
  retryAfter: float
  resetAfter: float
  lease: null
  scope: string
  replay: bool
bool(false)
string(8) "inflight"
denied (rate):
  allowed: bool
  reason: string
  limit: int
  remaining: int
  retryAfter: float
  resetAfter: float
  lease: null
  scope: string
  replay: bool
bool(false)
string(4) "rate"
int(0)
peek:
  allowed: bool
  reason: string
  limit: int
  remaining: int
  retryAfter: float
  resetAfter: float
  lease: null
  scope: string
  replay: bool
allowed,dryRun,lease,limit,reason,remaining,replay,reserved,resetAfter,retryAfter,scope,source,waitFor
bool(true)
bool(true)
bool(false)
bool(false)
