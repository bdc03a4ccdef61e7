<?php

// config/bundles.php (excerpt): the one change; framework.rate_limiter and security.yaml stay as they are.
return [
    Symfony\Bundle\FrameworkBundle\FrameworkBundle::class => ['all' => true],
    // ... the application's other bundles ...
    RateLimit\Bridge\Symfony\RateLimitBundle::class => ['all' => true],
];
