<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Laravel;

/**
 * The headers Laravel's throttle middleware sends with a denial (its buildException()).
 *
 * @internal
 */
final class Headers
{
    private function __construct()
    {
    }

    /**
     * @param int|null $limit      X-RateLimit-Limit (left out when null: no limit was told)
     * @param int      $retryAfter whole seconds, as availableIn()
     * @return array<string, int>
     */
    public static function denial(?int $limit, int $retryAfter): array
    {
        $headers = $limit === null ? [] : ['X-RateLimit-Limit' => $limit];
        return $headers + [
            'X-RateLimit-Remaining' => 0,
            'Retry-After' => $retryAfter,
            'X-RateLimit-Reset' => time() + $retryAfter,
        ];
    }
}
