<?php
// config/ratelimit.php (optional): the bridge's options and their defaults.
return [
    'scope' => 'laravel',    // the extension's scope of every Laravel key
    'max_attempts' => 60,    // bucket size of a key before a call in this worker gave one
    'decay_seconds' => 60,   // its refill time (Laravel's default decay) until a hit() gave one
    'inflight' => 0,         // > 0: at most this many hit()/attempt() of one key live at once
];
