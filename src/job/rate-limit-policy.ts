import { InvalidPayloadError } from '../errors/errors.js';
import { parseDuration } from '../util/duration.js';
import type { RateLimitPolicy } from './job.types.js';

/** OJS rate-limiting extension 6.2: what a key may look like. */
const KEY = /^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,99}$/;

/**
 * Checks a job's own `rate_limit` policy (OJS rate-limiting extension 6.1), when it is created
 * and when it is received: a policy a stage cannot enforce is refused with its reason, never
 * ignored. Windows take 10 ms to a day, as configured limits do (docs/flow-control.md).
 * @throws InvalidPayloadError naming the field that is wrong.
 */
export function validateRateLimitPolicy(value: unknown, where: string): asserts value is RateLimitPolicy | undefined {
  if (value === undefined) return;
  const fail = (what: string): never => {
    throw new InvalidPayloadError(`${where}: ${what}`);
  };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail('must be an object');
  const policy = value as Record<string, unknown>;
  if (typeof policy.key !== 'string' || !KEY.test(policy.key))
    fail('"key" must match ^[a-zA-Z0-9][a-zA-Z0-9._:-]*$ (at most 100 characters)');
  if (policy.concurrency !== undefined && (!Number.isInteger(policy.concurrency) || (policy.concurrency as number) < 0))
    fail('"concurrency" must be an integer >= 0');
  for (const field of ['rate', 'throttle'] as const) {
    const window = policy[field];
    if (window === undefined) continue;
    if (typeof window !== 'object' || window === null) fail(`"${field}" must be an object { limit, period }`);
    const { limit, period } = window as Record<string, unknown>;
    if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > 10_000)
      fail(`"${field}.limit" must be an integer from 1 to 10000`);
    const ms = typeof period === 'string' ? parseDuration(period) : undefined;
    if (ms === undefined || ms < 10 || ms > 86_400_000) fail(`"${field}.period" must be an ISO 8601 duration from 10 ms to 1 day`);
  }
  if (policy.on_limit !== undefined && !['wait', 'reschedule', 'drop'].includes(policy.on_limit as string))
    fail('"on_limit" must be "wait", "reschedule" or "drop"');
}
