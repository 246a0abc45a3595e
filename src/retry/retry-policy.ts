import type { ResolvedQueueConfig, ResolvedRetryPolicy, RetryPolicy } from '../config/config.types.js';
import { compileRetryPolicy } from '../config/queue-resolver.js';
import { parseDuration } from '../util/duration.js';
import { StagecoachError } from '../errors/errors.js';
import { matchesAny } from '../util/patterns.js';

/**
 * The OJS retry policy, exactly:
 * - `max_attempts` counts every attempt, the first included (1 = no retry).
 * - The wait after failed attempt n is `initial_interval * backoff_coefficient^(n-1)` (the
 *   `backoff_strategy` extension: `polynomial` n^coefficient, `linear` n, `none` 1), capped at
 *   `max_interval`, then multiplied by a factor in [0.5, 1.5) when `jitter` is on.
 * - `non_retryable_errors` match by exact error type or by `prefix.*`.
 * - Precedence, field by field: the job's `retry`, the queue's `default_retry` (which already
 *   holds `_default` and the system defaults).
 */
export function resolveRetryPolicy(queue: ResolvedQueueConfig, own: RetryPolicy | undefined): ResolvedRetryPolicy {
  if (own === undefined) return queue.default_retry;
  const merged = { ...queue.default_retry, ...own };
  // The queue's intervals are compiled already; only a job's own ones need parsing.
  return own.initial_interval === undefined && own.max_interval === undefined ? merged : compileRetryPolicy(merged);
}

/**
 * Refuses a policy a job cannot be retried by (OJS `INVALID_RETRY_POLICY`): producers get the
 * error when they publish, not a surprise when the job first fails.
 */
export function validateRetryPolicy(policy: unknown, where = 'retry'): void {
  const fail = (what: string): never => {
    throw new StagecoachError('INVALID_RETRY_POLICY', `${where}: ${what}`);
  };
  if (policy === undefined) return;
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) fail('must be an object');
  const p = policy as Record<string, unknown>;
  const known = [
    'max_attempts',
    'initial_interval',
    'backoff_coefficient',
    'backoff_strategy',
    'max_interval',
    'jitter',
    'non_retryable_errors',
    'on_exhaustion',
  ];
  for (const key of Object.keys(p)) if (!known.includes(key)) fail(`unknown field "${key}"`);
  if (p.max_attempts !== undefined && !(Number.isInteger(p.max_attempts) && (p.max_attempts as number) >= 1)) {
    fail('max_attempts must be an integer >= 1');
  }
  for (const field of ['initial_interval', 'max_interval']) {
    if (p[field] !== undefined && (typeof p[field] !== 'string' || parseDuration(p[field]) === undefined)) {
      fail(`${field} must be an ISO 8601 duration such as "PT1S"`);
    }
  }
  if (p.backoff_coefficient !== undefined && !(typeof p.backoff_coefficient === 'number' && p.backoff_coefficient >= 1)) {
    fail('backoff_coefficient must be a number >= 1');
  }
  if (p.backoff_strategy !== undefined && !BACKOFF_STRATEGIES.includes(p.backoff_strategy as string)) {
    fail(`backoff_strategy must be one of ${BACKOFF_STRATEGIES.map((name) => `"${name}"`).join(', ')}`);
  }
  if (p.jitter !== undefined && typeof p.jitter !== 'boolean') fail('jitter must be a boolean');
  if (
    p.non_retryable_errors !== undefined &&
    !(Array.isArray(p.non_retryable_errors) && p.non_retryable_errors.every((e) => typeof e === 'string'))
  ) {
    fail('non_retryable_errors must be an array of strings');
  }
  if (p.on_exhaustion !== undefined && p.on_exhaustion !== 'dead_letter' && p.on_exhaustion !== 'discard') {
    fail('on_exhaustion must be "dead_letter" or "discard"');
  }
}

/**
 * Milliseconds to wait after failed attempt `attempt` (1-based).
 * @param random a number in [0, 1), for the jitter factor 0.5 + random.
 */
export function retryDelayMs(policy: ResolvedRetryPolicy, attempt: number, random: number = Math.random()): number {
  const base = Math.min(policy.initialIntervalMs * growth(policy, attempt), policy.maxIntervalMs);
  return policy.jitter ? base * (0.5 + random) : base;
}

const BACKOFF_STRATEGIES: readonly string[] = ['exponential', 'polynomial', 'linear', 'none'];

/** The factor on `initial_interval` after failed attempt `attempt` (retry number n = attempt), per strategy. */
function growth(policy: ResolvedRetryPolicy, attempt: number): number {
  switch (policy.backoff_strategy) {
    case 'none':
      return 1;
    case 'linear':
      return attempt;
    case 'polynomial':
      return attempt ** policy.backoff_coefficient;
    default:
      return policy.backoff_coefficient ** (attempt - 1);
  }
}

export function isNonRetryable(policy: ResolvedRetryPolicy, errorType: string): boolean {
  return matchesAny(policy.non_retryable_errors, errorType);
}
