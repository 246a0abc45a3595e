import { parseDuration } from '../util/duration.js';
import { StagecoachError } from '../errors/errors.js';

/**
 * What a handler can ask for instead of plainly failing (OJS handler codes RETRY, DISCARD and
 * DEAD_LETTER). Throw one from `handle()`:
 *
 * ```ts
 * if (rateLimited) throw new RetryJob('PT30S', 'upstream rate limit');
 * if (obsolete) throw new DiscardJob('document was deleted');
 * if (hopeless) throw new DeadLetterJob('checksum mismatch');
 * ```
 */
export abstract class HandlerOutcome extends StagecoachError {}

/**
 * Retry after `delay` (ISO 8601 duration or milliseconds) instead of the policy's backoff. It
 * counts as an attempt: once `max_attempts` is reached the job is exhausted like any failure.
 */
export class RetryJob extends HandlerOutcome {
  readonly delayMs: number | undefined;
  constructor(delay?: string | number, reason = 'the handler asked for a retry') {
    super('HANDLER_ERROR', reason);
    this.delayMs = typeof delay === 'string' ? parseDuration(delay) : delay;
    if (typeof delay === 'string' && this.delayMs === undefined) {
      throw new StagecoachError('INVALID_REQUEST', `RetryJob: "${delay}" is not an ISO 8601 duration`);
    }
    if (typeof delay === 'number' && !(Number.isFinite(delay) && delay >= 0)) {
      throw new StagecoachError('INVALID_REQUEST', `RetryJob: a delay in milliseconds must be a finite number >= 0, got ${delay}`);
    }
  }
}

/** Drop the job: acknowledged, logged, not retried, not dead-lettered. */
export class DiscardJob extends HandlerOutcome {
  constructor(reason = 'the handler discarded the job') {
    super('HANDLER_ERROR', reason);
  }
}

/** Dead-letter the job now, whatever attempts remain. */
export class DeadLetterJob extends HandlerOutcome {
  constructor(
    reason = 'the handler dead-lettered the job',
    readonly type = 'DeadLetterJob',
  ) {
    super('HANDLER_ERROR', reason);
  }
}

/**
 * The job's `expires_at` passed before it started (OJS core: discarded, never run). Not thrown by
 * handlers: a stage discards such a job before its handler would run, wherever it waited.
 */
export class JobExpiredError extends DiscardJob {
  readonly type = 'JOB_EXPIRED';
  constructor(expiresAt: string) {
    super(`the job expired at ${expiresAt} before it started`);
  }
}

/** Whether a job's `expires_at` has passed at `now` (a job without one never expires). */
export function hasExpired(job: { expires_at?: string }, now: number = Date.now()): boolean {
  return job.expires_at !== undefined && Date.parse(job.expires_at) <= now;
}
