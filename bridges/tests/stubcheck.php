<?php
// Static check of PHP sources against the extension's stub (stubs/ratelimit.stub.php), the type
// source: no PHPStan or Psalm is packaged in Debian 12, so this walks the syntax tree with
// Debian's php-parser (nikic/php-parser 4) and checks what the bridges ask of the extension:
//   - every call of a ratelimit_*() function names a function of the stub, passes no unknown
//     or duplicate named argument, no positional argument after a named one or beyond the
//     parameters, every required parameter, and arguments whose type it can infer (literals,
//     casts, typed parameters and properties, our own methods' return types, the stub's return
//     types) of a type the parameter takes under strict_types;
//   - every property read and method call on a RateLimit\Decision exists in the stub;
//   - every file declares strict_types=1.
// Usage: php stubcheck.php STUB FILE...   Prints one line per problem, then a summary line;
// exits 1 when a problem was found.
declare(strict_types=1);

require_once '/usr/share/php/PhpParser/autoload.php';

use PhpParser\Node;
use PhpParser\Node\Expr;
use PhpParser\Node\Stmt;
use PhpParser\NodeTraverser;
use PhpParser\NodeVisitor\NameResolver;
use PhpParser\NodeVisitorAbstract;
use PhpParser\ParserFactory;

/** @return list<string> lower-case type names; [] when there is no declaration */
function typeNames(?Node $type): array
{
    if ($type === null) {
        return [];
    }
    if ($type instanceof Node\NullableType) {
        return [...typeNames($type->type), 'null'];
    }
    if ($type instanceof Node\UnionType) {
        return array_merge(...array_map('typeNames', $type->types));
    }
    if ($type instanceof Node\Name) {
        return [strtolower($type->toString())];
    }
    return [strtolower((string) $type)];
}

function parseFile(string $file): array
{
    $parser = (new ParserFactory())->create(ParserFactory::PREFER_PHP7);
    $ast = $parser->parse((string) file_get_contents($file)) ?? [];
    $traverser = new NodeTraverser();
    $traverser->addVisitor(new NameResolver());
    return $traverser->traverse($ast);
}

/** What a set of files declares: functions, class properties and method return types. */
final class Declarations extends NodeVisitorAbstract
{
    /** @var array<string, list<array{name: string, types: list<string>, optional: bool, variadic: bool}>> */
    public array $functions = [];
    /** @var array<string, list<string>> */
    public array $functionReturns = [];
    /** @var array<string, array<string, list<string>>> class => property => types */
    public array $properties = [];
    /** @var array<string, array<string, list<string>>> class => method => return types */
    public array $methods = [];
    private ?string $class = null;

    public function enterNode(Node $node)
    {
        if ($node instanceof Stmt\ClassLike && $node->namespacedName !== null) {
            $this->class = strtolower($node->namespacedName->toString());
            $this->properties[$this->class] ??= [];
            $this->methods[$this->class] ??= [];
        } elseif ($node instanceof Stmt\Function_) {
            $name = strtolower($node->namespacedName->toString());
            $this->functions[$name] = array_map(fn (Node\Param $p) => [
                'name' => (string) $p->var->name,
                'types' => typeNames($p->type),
                'optional' => $p->default !== null || $p->variadic,
                'variadic' => $p->variadic,
            ], $node->params);
            $this->functionReturns[$name] = typeNames($node->returnType);
        } elseif ($node instanceof Stmt\Property && $this->class !== null) {
            foreach ($node->props as $prop) {
                $this->properties[$this->class][(string) $prop->name] = typeNames($node->type);
            }
        } elseif ($node instanceof Stmt\ClassMethod && $this->class !== null) {
            $this->methods[$this->class][strtolower((string) $node->name)] = typeNames($node->returnType);
            foreach ($node->params as $p) {
                if ($p->flags !== 0) {   // a promoted constructor parameter
                    $this->properties[$this->class][(string) $p->var->name] = typeNames($p->type);
                }
            }
        }
        return null;
    }

    public function leaveNode(Node $node)
    {
        if ($node instanceof Stmt\ClassLike) {
            $this->class = null;
        }
        return null;
    }
}

final class Checker extends NodeVisitorAbstract
{
    /** @var list<string> */
    public array $problems = [];
    public int $calls = 0;
    public int $typedArgs = 0;
    public int $untypedArgs = 0;
    public int $decisionReads = 0;
    private ?string $class = null;
    /** @var list<array<string, list<string>>> variable types, one scope per function */
    private array $scopes = [[]];

    public function __construct(private Declarations $stub, private Declarations $own, private string $file)
    {
    }

    private function problem(Node $node, string $what): void
    {
        $this->problems[] = sprintf('%s:%d: %s', $this->file, $node->getStartLine(), $what);
    }

    /** @return list<string> the inferred type of an expression; [] when unknown */
    private function typeOf(Expr $e): array
    {
        return match (true) {
            $e instanceof Node\Scalar\String_, $e instanceof Node\Scalar\Encapsed, $e instanceof Expr\Cast\String_,
            $e instanceof Expr\BinaryOp\Concat => ['string'],
            $e instanceof Node\Scalar\LNumber, $e instanceof Expr\Cast\Int_ => ['int'],
            $e instanceof Node\Scalar\DNumber, $e instanceof Expr\Cast\Double => ['float'],
            $e instanceof Expr\Cast\Bool_ => ['bool'],
            $e instanceof Expr\ConstFetch => match (strtolower($e->name->toString())) {
                'true', 'false' => ['bool'],
                'null' => ['null'],
                default => [],
            },
            $e instanceof Expr\Variable && \is_string($e->name) =>
                $e->name === 'this' ? ($this->class === null ? [] : [$this->class]) : (end($this->scopes)[$e->name] ?? []),
            $e instanceof Expr\PropertyFetch && $e->name instanceof Node\Identifier =>
                $this->propertyType($this->typeOf($e->var), (string) $e->name),
            $e instanceof Expr\MethodCall && $e->name instanceof Node\Identifier =>
                $this->methodType($this->typeOf($e->var), strtolower((string) $e->name)),
            $e instanceof Expr\StaticCall && $e->class instanceof Node\Name && $e->name instanceof Node\Identifier =>
                $this->methodType([$this->className($e->class)], strtolower((string) $e->name)),
            $e instanceof Expr\FuncCall && $e->name instanceof Node\Name =>
                $this->stub->functionReturns[$this->functionName($e->name)] ?? [],
            default => [],
        };
    }

    private function className(Node\Name $name): string
    {
        $n = strtolower($name->toString());
        return \in_array($n, ['self', 'static'], true) ? (string) $this->class : $n;
    }

    private function functionName(Node\Name $name): string
    {
        // An unqualified call in a namespace falls back to the global function.
        return strtolower($name->getLast());
    }

    /** @param list<string> $types */
    private function propertyType(array $types, string $prop): array
    {
        foreach ($types as $t) {
            if (isset($this->own->properties[$t][$prop])) {
                return $this->own->properties[$t][$prop];
            }
            if (isset($this->stub->properties[$t][$prop])) {
                return $this->stub->properties[$t][$prop];
            }
        }
        return [];
    }

    /** @param list<string> $types */
    private function methodType(array $types, string $method): array
    {
        foreach ($types as $t) {
            $r = $this->own->methods[$t][$method] ?? $this->stub->methods[$t][$method] ?? null;
            if ($r !== null) {
                return array_map(fn ($x) => \in_array($x, ['self', 'static'], true) ? $t : $x, $r);
            }
        }
        return [];
    }

    public function enterNode(Node $node)
    {
        if ($node instanceof Stmt\ClassLike && $node->namespacedName !== null) {
            $this->class = strtolower($node->namespacedName->toString());
        } elseif ($node instanceof Stmt\ClassMethod || $node instanceof Stmt\Function_
            || $node instanceof Expr\Closure || $node instanceof Expr\ArrowFunction) {
            $vars = $node instanceof Expr\ArrowFunction ? end($this->scopes) : [];
            foreach ($node->params as $p) {
                if ($p->var instanceof Expr\Variable && \is_string($p->var->name)) {
                    $vars[$p->var->name] = typeNames($p->type);
                }
            }
            $this->scopes[] = $vars;
        } elseif ($node instanceof Expr\FuncCall && $node->name instanceof Node\Name
            && str_starts_with($this->functionName($node->name), 'ratelimit_')) {
            $this->checkCall($node);
        } elseif (($node instanceof Expr\PropertyFetch || $node instanceof Expr\NullsafePropertyFetch
            || $node instanceof Expr\MethodCall) && $node->name instanceof Node\Identifier) {
            if (\in_array('ratelimit\\decision', $this->typeOf($node->var), true)) {
                $this->decisionReads++;
                $name = (string) $node->name;
                $known = $node instanceof Expr\MethodCall
                    ? isset($this->stub->methods['ratelimit\\decision'][strtolower($name)])
                    : isset($this->stub->properties['ratelimit\\decision'][$name]);
                if (!$known) {
                    $this->problem($node, "RateLimit\\Decision has no " . ($node instanceof Expr\MethodCall ? "method $name()" : "property \$$name") . ' in the stub');
                }
            }
        }
        return null;
    }

    public function leaveNode(Node $node)
    {
        if ($node instanceof Expr\Assign && $node->var instanceof Expr\Variable && \is_string($node->var->name)) {
            $this->scopes[\count($this->scopes) - 1][$node->var->name] = $this->typeOf($node->expr);
        } elseif ($node instanceof Stmt\ClassMethod || $node instanceof Stmt\Function_
            || $node instanceof Expr\Closure || $node instanceof Expr\ArrowFunction) {
            array_pop($this->scopes);
        } elseif ($node instanceof Stmt\ClassLike) {
            $this->class = null;
        }
        return null;
    }

    private function checkCall(Expr\FuncCall $call): void
    {
        $this->calls++;
        $fn = $this->functionName($call->name);
        $params = $this->stub->functions[$fn] ?? null;
        if ($params === null) {
            $this->problem($call, "$fn() is not declared in the stub");
            return;
        }
        $given = [];
        $named = false;
        foreach ($call->args as $i => $arg) {
            if (!$arg instanceof Node\Arg || $arg->unpack) {
                $this->problem($call, "$fn(): argument unpacking is not checked");
                return;
            }
            if ($arg->name !== null) {
                $named = true;
                $name = (string) $arg->name;
                $index = array_search($name, array_column($params, 'name'), true);
                if ($index === false) {
                    $this->problem($call, "$fn() has no parameter \$$name");
                    continue;
                }
            } else {
                if ($named) {
                    $this->problem($call, "$fn(): a positional argument after a named one");
                    continue;
                }
                $index = $i;
                if (!isset($params[$index])) {
                    $this->problem($call, "$fn() takes at most " . \count($params) . ' arguments');
                    continue;
                }
            }
            $param = $params[$index];
            if (isset($given[$param['name']])) {
                $this->problem($call, "$fn(): \$" . $param['name'] . ' given twice');
            }
            $given[$param['name']] = true;
            $types = $this->typeOf($arg->value);
            if ($types === []) {
                $this->untypedArgs++;
                continue;
            }
            $this->typedArgs++;
            foreach ($types as $t) {
                $ok = \in_array($t, $param['types'], true)
                    || ($t === 'int' && \in_array('float', $param['types'], true))
                    || ($t === 'mixed');
                if (!$ok) {
                    $this->problem($call, sprintf('%s(): $%s takes %s, given %s', $fn, $param['name'], implode('|', $param['types']), implode('|', $types)));
                    break;
                }
            }
        }
        foreach ($params as $p) {
            if (!$p['optional'] && !isset($given[$p['name']])) {
                $this->problem($call, "$fn(): required \$" . $p['name'] . ' missing');
            }
        }
    }
}

[$self, $stubFile] = [$argv[0], $argv[1] ?? ''];
$files = \array_slice($argv, 2);
if ($stubFile === '' || $files === []) {
    fwrite(STDERR, "usage: php $self STUB FILE...\n");
    exit(2);
}
$stub = new Declarations();
$t = new NodeTraverser();
$t->addVisitor($stub);
$t->traverse(parseFile($stubFile));

$own = new Declarations();
$asts = [];
foreach ($files as $f) {
    $asts[$f] = parseFile($f);
    $t = new NodeTraverser();
    $t->addVisitor($own);
    $t->traverse($asts[$f]);
}
$problems = [];
$calls = $typed = $untyped = $reads = 0;
foreach ($asts as $f => $ast) {
    if (!preg_match('/^<\?php\s+(?:(?:\/\/[^\n]*\n|\/\*.*?\*\/)\s*)*declare\(strict_types=1\);/s', (string) file_get_contents($f))) {
        $problems[] = "$f: does not start with declare(strict_types=1)";
    }
    $checker = new Checker($stub, $own, $f);
    $t = new NodeTraverser();
    $t->addVisitor($checker);
    $t->traverse($ast);
    array_push($problems, ...$checker->problems);
    $calls += $checker->calls;
    $typed += $checker->typedArgs;
    $untyped += $checker->untypedArgs;
    $reads += $checker->decisionReads;
}
foreach ($problems as $p) {
    echo $p, "\n";
}
printf("%d files, %d ratelimit_*() calls (%d arguments type-checked, %d of unknown type), %d Decision reads: %d problems\n",
    \count($files), $calls, $typed, $untyped, $reads, \count($problems));
exit($problems === [] ? 0 : 1);
