import { InvalidPayloadError } from '../../errors/errors.js';
import type { RateLimitPolicy } from '../../job/job.types.js';
import { validateRateLimitPolicy } from '../../job/rate-limit-policy.js';
import type { LimitShape } from '../../inspect/limit-report.js';
import { parseDuration } from '../../util/duration.js';
import type { EnvelopeCache } from './envelope-cache.js';

/** The unit words of the `rate`/`period` shorthand, as ISO 8601 durations. */
const UNITS: Readonly<Record<string, string>> = { second: 'PT1S', minute: 'PT1M', hour: 'PT1H', day: 'P1D' };

/**
 * A push's `options.rate_limit` as the Publisher takes it (OJS rate-limiting extension 6.1): the
 * policy as given, or its shorthand `max_per_second` (ojs-extension-lifecycle 8.3, the conformance
 * suite's) as a window of one second, or `rate: N, period: "second"` (minute, hour, day, or an
 * ISO 8601 duration) as a window of N per period. Without a `key`, jobs of one queue share one limit. A
 * tenant's key is its own: another tenant's jobs under the same name never take its tokens.
 * @throws InvalidPayloadError naming the field that is wrong.
 */
export function rateLimitOf(value: unknown, queue: string, tenant: string | undefined): RateLimitPolicy | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) throw new InvalidPayloadError('"options.rate_limit" must be a JSON object');
  const { max_per_second: perSecond, key, ...rest } = value as Record<string, unknown>;
  // `rate: N, period: "second"` (the conformance suite's EXT-RL-004; no spec has it): a window of N per unit.
  if (typeof rest.rate === 'number') {
    const period = typeof rest.period === 'string' ? (UNITS[rest.period] ?? rest.period) : rest.period;
    rest.rate = { limit: rest.rate, period };
    delete rest.period;
  }
  if (perSecond !== undefined && (!Number.isInteger(perSecond) || (perSecond as number) < 1)) {
    throw new InvalidPayloadError(`"options.rate_limit.max_per_second" must be a positive integer, got ${JSON.stringify(perSecond)}`);
  }
  if (key !== undefined && typeof key !== 'string') throw new InvalidPayloadError('"options.rate_limit.key" must be a string');
  const named = key ?? `queue.${queue}`;
  const policy: Record<string, unknown> = {
    ...rest,
    key: tenant === undefined ? named : `tenant.${tenant}.${named}`,
    ...(perSecond === undefined ? {} : { rate: { limit: perSecond, period: 'PT1S' } }),
  };
  validateRateLimitPolicy(policy, '"options.rate_limit"');
  return policy;
}

/**
 * The policy of key `key` as the newest job pushed through this server carrying it says (its
 * windows in ms): what `GET /ojs/v1/rate-limits/{key}` shows of a partition no job has taken a
 * token of yet. Undefined when no envelope kept carries it.
 */
export function pushedPolicy(envelopes: EnvelopeCache, key: string): LimitShape | undefined {
  let found: RateLimitPolicy | undefined;
  for (const { job } of envelopes.values()) if (job.rate_limit?.key === key) found = job.rate_limit;
  if (found === undefined) return undefined;
  const window = (value: { limit: number; period: string } | undefined): LimitShape['rate'] =>
    value === undefined ? undefined : { limit: value.limit, periodMs: parseDuration(value.period) ?? 0 };
  return { concurrency: found.concurrency, rate: window(found.rate), throttle: window(found.throttle) };
}
