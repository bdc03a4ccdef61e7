<?php
// config/ratelimit.php (optional): the bridge's options and their defaults.
return [
    'scope' => 'laravel',    // the extension's scope of every Laravel key (timers: 'laravel:timer')
    'inflight' => 0,         // > 0: at most this many hit()/attempt() of one key live at once
];
