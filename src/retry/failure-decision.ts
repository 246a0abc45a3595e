import type { ResolvedRetryPolicy } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { DeadLetterJob, DiscardJob, RetryJob } from './handler-outcomes.js';
import { isNonRetryable, retryDelayMs } from './retry-policy.js';

export type FailureDecision =
  | { action: 'retry'; nextAttempt: number; delayMs: number }
  | { action: 'dead_letter'; exhausted: boolean }
  | { action: 'discard'; exhausted: boolean };

/** Failures no retry can mend: the job or the code is wrong, not the weather. */
const NEVER_RETRIED = new Set([
  'INVALID_PAYLOAD',
  'UNKNOWN_OUTPUT',
  'JOB_TYPE_NOT_ALLOWED',
  'TENANT_REQUIRED',
  'TENANT_MISMATCH',
  'INVALID_RETRY_POLICY',
  'NON_RETRYABLE',
  'PAYLOAD_MISSING',
  'CONSUMER_TIMEOUT',
]);

/**
 * What happens to a job whose attempt `attempt` failed with `error` (thrown as `thrown`).
 * Pure, so the OJS rules are unit-tested apart from the broker.
 */
export function decideFailure(
  policy: ResolvedRetryPolicy,
  attempt: number,
  error: { readonly type: string },
  thrown: unknown,
  random = Math.random(),
): FailureDecision {
  if (thrown instanceof DiscardJob) return { action: 'discard', exhausted: false };
  const code = thrown instanceof StagecoachError ? thrown.code : undefined;
  if (thrown instanceof DeadLetterJob || (code !== undefined && NEVER_RETRIED.has(code)) || isNonRetryable(policy, error.type)) {
    return { action: 'dead_letter', exhausted: false };
  }
  if (attempt >= policy.max_attempts) {
    return { action: policy.on_exhaustion === 'discard' ? 'discard' : 'dead_letter', exhausted: true };
  }
  const delayMs = thrown instanceof RetryJob && thrown.delayMs !== undefined ? thrown.delayMs : retryDelayMs(policy, attempt, random);
  return { action: 'retry', nextAttempt: attempt + 1, delayMs };
}
