<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

use RateLimit\Decision;

/**
 * The headers Laravel's throttle middleware sends with a denial, from a Decision.
 *
 * @internal
 */
final class Headers
{
    private function __construct()
    {
    }

    /** @return array<string, int> */
    public static function of(Decision $decision): array
    {
        $retryAfter = max(1, (int) ceil($decision->retryAfter));
        return [
            'X-RateLimit-Limit' => $decision->limit,
            'X-RateLimit-Remaining' => 0,
            'Retry-After' => $retryAfter,
            'X-RateLimit-Reset' => time() + $retryAfter,
        ];
    }
}
