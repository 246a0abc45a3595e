import type { ResolvedRetryPolicy } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { DeadLetterJob, DiscardJob, RetryJob } from './handler-outcomes.js';
import { isNonRetryable, retryDelayMs } from './retry-policy.js';

/**
 * What a retry policy decides for a failed attempt: named by the settlement result it leads to
 * (SettlementResult, src/runner/settle/settlement-result.ts, which checks that each kind is one of its own).
 */
export type FailureDecision =
  | { kind: 'retried'; nextAttempt: number; delayMs: number }
  | { kind: 'dead-lettered'; exhausted: boolean }
  | { kind: 'discarded'; exhausted: boolean };

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
  if (thrown instanceof DiscardJob) return { kind: 'discarded', exhausted: false };
  const code = thrown instanceof StagecoachError ? thrown.code : undefined;
  if (thrown instanceof DeadLetterJob || (code !== undefined && NEVER_RETRIED.has(code)) || isNonRetryable(policy, error.type)) {
    return { kind: 'dead-lettered', exhausted: false };
  }
  if (attempt >= policy.max_attempts) {
    return policy.on_exhaustion === 'discard' ? { kind: 'discarded', exhausted: true } : { kind: 'dead-lettered', exhausted: true };
  }
  const delayMs = thrown instanceof RetryJob && thrown.delayMs !== undefined ? thrown.delayMs : retryDelayMs(policy, attempt, random);
  return { kind: 'retried', nextAttempt: attempt + 1, delayMs };
}
