import { PublishError, QueueUnavailableError } from '../../errors/errors.js';

/** How long a job whose emit met a queue without a leader waits before it runs again: elections take seconds. */
export const UNAVAILABLE_QUEUE_WAIT_MS = 1_000;

/**
 * An emit that failed through no fault of its job (a lost channel, a queue without a leader:
 * PublishError.transient) hands the job back unflagged, no attempt spent, its confirmed emits
 * repeated when it runs again (at-least-once). @returns how long it waits first, or undefined
 * when the failure is the job's (a full queue refused an emit: it fails like a throw).
 */
export function handBackWait(err: unknown): number | undefined {
  if (!(err instanceof PublishError) || !err.transient) return undefined;
  // A lost channel is healed by the time the job is back; a leader is elected in seconds.
  return err instanceof QueueUnavailableError ? UNAVAILABLE_QUEUE_WAIT_MS : 0;
}
