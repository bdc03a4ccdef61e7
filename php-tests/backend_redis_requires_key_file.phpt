--TEST--
ratelimit.backend=redis without ratelimit.key_file: a RateLimit\Exception naming the directive, before anything connects (a default key next to each host's database would split every limit by host)
--EXTENSIONS--
ratelimit
--INI--
ratelimit.backend=redis
ratelimit.redis_url=redis://127.0.0.1:1/0
ratelimit.key_file=
--FILE--
<?php
foreach (['acquire' => fn() => ratelimit_acquire('x', 5, 60), 'stats' => fn() => ratelimit_stats()] as $name => $call) {
    try {
        $call();
        echo "$name: no exception\n";
    } catch (RateLimit\Exception $e) {
        echo "$name: ", get_class($e), ": ", $e->getMessage(), "\n";
    }
}
?>
--EXPECT--
acquire: RateLimit\Exception: ratelimit: ratelimit.key_file must be set with ratelimit.backend=redis (every host must use the same key)
stats: RateLimit\Exception: ratelimit: ratelimit.key_file must be set with ratelimit.backend=redis (every host must use the same key)
