<?php
// config/app.php (excerpt): Composer's package discovery adds the provider by itself; without it:
return [
    'providers' => [
        // ... Laravel's and the application's providers ...
        RateLimit\Bridge\Laravel\RateLimitServiceProvider::class,
    ],
];
