--TEST--
stubs/ratelimit.stub.php declares exactly what the loaded extension reports through Reflection
--EXTENSIONS--
ratelimit
--FILE--
<?php
require_once __DIR__ . '/_helpers.inc';
rl_isolate();
require __DIR__ . '/_reflect.inc';
$stub = dirname(__DIR__) . '/stubs/ratelimit.stub.php';

// The extension, as loaded here.
$ext = new ReflectionExtension('ratelimit');
$real = rl_describe_api(array_keys($ext->getFunctions()), $ext->getClassNames());

// ext-php-rs 0.16 exposes Decision's properties through getters: Reflection sees them untyped,
// with a NULL default, and sees a constructor that refuses to run. What a user can observe is
// compared instead: the types of the values in real decisions (allowed with a lease, denied
// without), whether a write is refused, and whether `new` is refused.
$samples = [ratelimit_acquire('stub-a', 1, 60, 1), ratelimit_acquire('stub-a', 1, 60, 1), ratelimit_peek('stub-b', 1, 60)];
foreach ($real['classes']['RateLimit\Decision']['properties'] as $name => &$p) {
    $types = array_unique(array_map(fn($d) => get_debug_type($d->$name), $samples));
    sort($types);
    $p['type'] = implode('|', $types);
    $before = $samples[0]->$name;
    try {
        $samples[0]->$name = is_string($before) ? 'changed' : null;
        $refused = false;
    } catch (Throwable $e) {
        $refused = $samples[0]->$name === $before;
    }
    $p['readonly'] = $refused;
    $p['hasDefault'] = !$refused;
}
unset($p);
try {
    new RateLimit\Decision();
} catch (Throwable $e) {
    // Declared public by ext-php-rs but refusing to run: to a user, that is a private constructor.
    $real['classes']['RateLimit\Decision']['methods']['__construct']['visibility'] = 'private';
    $real['classes']['RateLimit\Decision']['instantiable'] = false;
}

// The stub, in a process without the extension (it could not be declared next to it).
$code = 'require getenv("RL_REFLECT"); require getenv("RL_STUB");'
    . '$fs = array_values(array_filter(get_defined_functions()["user"], fn($f) => (new ReflectionFunction($f))->getFileName() === realpath(getenv("RL_STUB"))));'
    . '$cs = array_values(array_filter(array_merge(get_declared_classes(), get_declared_interfaces()), fn($c) => (new ReflectionClass($c))->getFileName() === realpath(getenv("RL_STUB"))));'
    . '$fs = array_map(fn($f) => (new ReflectionFunction($f))->getName(), $fs);'
    . 'echo json_encode(rl_describe_api($fs, $cs));';
$r = rl_run([], $code, ['extension' => false, 'inherit' => false, 'env' => ['RL_REFLECT' => __DIR__ . '/_reflect.inc', 'RL_STUB' => $stub]]);
$stubApi = json_decode($r['out'], true);
if (!is_array($stubApi)) {
    echo "stub could not be loaded: ", $r['out'], $r['err'], "\n";
    exit;
}
echo "functions: ", implode(', ', array_keys($real['functions'])), "\n";
echo "classes: ", implode(', ', array_keys($real['classes'])), "\n";

$a = rl_flatten($stubApi);
$b = rl_flatten($real);
$diff = 0;
foreach (array_unique(array_merge(array_keys($a), array_keys($b))) as $k) {
    $sa = $a[$k] ?? '(absent)';
    $sb = $b[$k] ?? '(absent)';
    if ($sa !== $sb) {
        echo "DIFF $k: stub $sa, extension $sb\n";
        $diff++;
    }
}
echo "compared ", count($b), " facts, differences: $diff\n";

// Every function and parameter documented, with the exceptions it throws.
$src = file_get_contents($stub);
$tokens = token_get_all($src);
$doc = null;
$missing = [];
foreach ($tokens as $i => $t) {
    if (is_array($t) && $t[0] === T_DOC_COMMENT) {
        $doc = $t[1];
    } elseif (is_array($t) && $t[0] === T_FUNCTION) {
        for ($j = $i + 1; is_array($tokens[$j]) && $tokens[$j][0] === T_WHITESPACE; $j++);
        $name = $tokens[$j][1];
        if ($doc === null) {
            $missing[] = "$name: no docblock";
        } elseif (str_starts_with($name, 'ratelimit_')) {
            foreach ($real['functions'][$name]['params'] ?? [] as $p) {
                if (!preg_match('/@param\s+\S+\s+\$' . $p['name'] . '\b/', $doc)) $missing[] = "$name: @param \${$p['name']}";
            }
            if (!str_contains($doc, '@throws')) $missing[] = "$name: @throws";
        }
        $doc = null;
    }
}
foreach (['ValueError', 'TypeError', 'RateLimit\Exception', 'retryAfter', 'busy_timeout_ms', 'lease_ttl', 'max_entries', 'ipv6_prefix', 'fail_open', 'key_file', 'db_path'] as $word) {
    if (!str_contains($src, $word)) $missing[] = "mentions $word";
}
echo "documentation gaps: ", $missing ? implode('; ', $missing) : 'none', "\n";

// The php.ini table of the stub names every directive with its default.
preg_match_all('/^ \* \| (ratelimit\.[a-z0-9_]+)\s*\| ("[^"]*"|\S+)\s*\|/m', $src, $rows, PREG_SET_ORDER);
$documented = [];
foreach ($rows as [, $name, $default]) {
    $documented[$name] = trim($default, '"');
}
// The defaults, from a PHP with no settings (this one has the test's own store settings).
$actual = json_decode(shell_exec(escapeshellarg(PHP_BINARY) . ' -n -d extension=' . escapeshellarg(rl_so())
    . ' -r ' . escapeshellarg('echo json_encode((new ReflectionExtension("ratelimit"))->getINIEntries());')), true);
ksort($documented);
ksort($actual);
echo "ini table matches the extension: ", $documented === $actual ? 'yes' : 'NO ' . json_encode([$documented, $actual]), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/_helpers.inc';
rl_clean('stub_matches_reflection');
?>
--EXPECTF--
functions: ratelimit_acquire, ratelimit_acquire_all, ratelimit_end_request, ratelimit_metrics, ratelimit_peek, ratelimit_refund, ratelimit_release, ratelimit_reserve, ratelimit_reset, ratelimit_stats, ratelimit_top
classes: RateLimit\Decision, RateLimit\Exception
compared %d facts, differences: 0
documentation gaps: none
ini table matches the extension: yes
