<?php

declare(strict_types=1);

namespace RateLimit\Bridge\Symfony;

use RateLimit\Bridge\Key;
use Symfony\Component\OptionsResolver\Exception\MissingOptionsException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\Policy\NoLimiter;

/**
 * Symfony's RateLimiterFactory on the extension: takes the same configuration array (the options
 * of a `framework.rate_limiter.<name>` entry) and creates limiters whose decisions come from the
 * extension, exact across every worker and master of the host. The Symfony bundle
 * (RateLimitBundle) registers one per `framework.rate_limiter` entry as `limiter.<name>`.
 *
 * Options, as Symfony's:
 * - `id` (required): the limiter's name; it becomes the extension's scope (see Key::scope()).
 * - `policy` (required): `token_bucket`, `fixed_window`, `sliding_window` or `no_limit`, each
 *   decided by the extension's policy of that name.
 * - `token_bucket`: `limit` (the burst) and `rate` => [`interval` (e.g. '1 minute'), `amount`
 *   (default 1)]: `amount` tokens back at each whole `interval`, as Symfony's bucket refills
 *   (the extension's `stepped_bucket` with `$per` = `interval`).
 * - `fixed_window`, `sliding_window`: `limit` per `interval`.
 * Bridge-only:
 * - `inflight` (default 0): at most this many accepted consume() of one key live at once, each
 *   held until ExtensionLimiter::release(), the end of the request, or ratelimit.lease_ttl.
 * - `scope`: the extension's scope, instead of one derived from `id`.
 * FrameworkBundle's `lock_factory`, `cache_pool` and `storage_service` are accepted and ignored:
 * the extension needs neither a lock nor a cache.
 */
final class ExtensionLimiterFactory implements LimiterFactoryInterface
{
    private const IGNORED = ['lock_factory', 'cache_pool', 'storage_service'];

    private readonly string $policy;
    private readonly string $scope;
    private readonly int $limit;
    private readonly float $per;
    private readonly int $inflight;
    private readonly int $interval;
    private readonly int $amount;

    /**
     * @param array<string, mixed> $config
     *
     * @throws MissingOptionsException   `id` or `policy` missing (an \InvalidArgumentException)
     * @throws \InvalidArgumentException an option unknown or of the wrong type
     * @throws \LogicException           an interval that does not parse, or an unsupported policy
     */
    public function __construct(array $config)
    {
        $known = ['id', 'policy', 'limit', 'rate', 'interval', 'inflight', 'scope', ...self::IGNORED];
        $unknown = array_diff(array_keys($config), $known);
        if ($unknown !== []) {
            throw new \InvalidArgumentException(sprintf(
                'The option(s) "%s" do not exist. Defined options are: "%s".',
                implode('", "', $unknown),
                implode('", "', $known),
            ));
        }
        $missing = array_values(array_diff(['id', 'policy'], array_keys($config)));
        if ($missing !== []) {
            // Symfony's OptionsResolver (a dependency of symfony/rate-limiter) words it so.
            $format = \count($missing) > 1
                ? 'The required options "%s" are missing.'
                : 'The required option "%s" is missing.';
            throw new MissingOptionsException(sprintf($format, implode('", "', $missing)));
        }
        $id = self::string($config, 'id');
        $this->policy = self::string($config, 'policy');
        $this->scope = isset($config['scope']) ? self::string($config, 'scope') : Key::scope($id);
        $this->inflight = isset($config['inflight']) ? self::int($config, 'inflight', 0) : 0;

        switch ($this->policy) {
            case 'token_bucket':
                $this->limit = self::int($config, 'limit', 1);
                $rate = $config['rate'] ?? null;
                if (!\is_array($rate) || !isset($rate['interval'])) {
                    throw new \InvalidArgumentException(
                        'A token_bucket limiter needs the option "rate" with an "interval".',
                    );
                }
                $extra = array_diff(array_keys($rate), ['interval', 'amount']);
                if ($extra !== []) {
                    throw new \InvalidArgumentException(
                        sprintf('The option(s) "rate.%s" do not exist.', implode('", "rate.', $extra)),
                    );
                }
                $this->amount = isset($rate['amount']) ? self::int($rate, 'amount', 1) : 1;
                $this->interval = self::seconds(self::string($rate, 'interval'));
                // `amount` tokens at each whole `interval` (the extension's stepped_bucket).
                $this->per = (float) $this->interval;
                break;
            case 'fixed_window':
            case 'sliding_window':
                $this->limit = self::int($config, 'limit', 1);
                $this->interval = self::seconds(self::string($config, 'interval'));
                $this->amount = $this->limit;
                $this->per = (float) $this->interval;
                break;
            case 'no_limit':
                $this->limit = \PHP_INT_MAX;
                $this->per = 1.0;
                $this->interval = 1;
                $this->amount = 1;
                break;
            default:
                throw new \LogicException(sprintf(
                    'Limiter policy "%s" does not exists, it must be either "token_bucket", "sliding_window",'
                    . ' "fixed_window" or "no_limit".',
                    $this->policy,
                ));
        }
        if ($this->policy !== 'no_limit' && ($this->per < 0.001 || $this->per > 1e9)) {
            throw new \InvalidArgumentException(sprintf(
                'The limiter "%s" has a period of %s s: the extension takes 0.001 to 10^9 s.',
                $id,
                $this->per,
            ));
        }
    }

    /**
     * The limiter of `$key` (a client address, a user name, ...). null and '' share one bucket,
     * as in Symfony.
     */
    public function create(?string $key = null): LimiterInterface
    {
        if ($this->policy === 'no_limit') {
            return new NoLimiter();
        }
        return new ExtensionLimiter(
            $this->scope,
            Key::subject($key),
            $this->limit,
            $this->per,
            $this->inflight,
            $this->policy,
            $this->interval,
            $this->amount,
        );
    }

    /** Seconds of an interval as Symfony reads it ("1 minute", "15 seconds", "1 day", ...). */
    private static function seconds(string $interval): int
    {
        $now = \DateTimeImmutable::createFromFormat('U', (string) time());
        try {
            $then = $now === false ? false : @$now->modify('+' . $interval);
        } catch (\Exception) {
            // PHP 8.3 and later throw DateMalformedStringException where 8.2 returned false.
            $then = false;
        }
        if ($now === false || $then === false) {
            throw new \LogicException(sprintf(
                'Cannot parse interval "%s", please use a valid unit as described on'
                . ' https://www.php.net/datetime.formats.relative.',
                $interval,
            ));
        }
        $seconds = $then->getTimestamp() - $now->getTimestamp();
        if ($seconds <= 0) {
            throw new \LogicException(sprintf('The interval "%s" is not positive.', $interval));
        }
        return $seconds;
    }

    /** @param array<string, mixed> $options */
    private static function string(array $options, string $name): string
    {
        if (!isset($options[$name]) || !\is_string($options[$name]) || $options[$name] === '') {
            throw new \InvalidArgumentException(sprintf('The option "%s" must be a non-empty string.', $name));
        }
        return $options[$name];
    }

    /** @param array<string, mixed> $options */
    private static function int(array $options, string $name, int $min): int
    {
        if (!isset($options[$name]) || !\is_int($options[$name]) || $options[$name] < $min) {
            throw new \InvalidArgumentException(
                sprintf('The option "%s" must be an integer of at least %d.', $name, $min),
            );
        }
        return $options[$name];
    }
}
