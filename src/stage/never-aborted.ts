/**
 * The signal of jobs without a timeout: nothing ever aborts it. Shared by every such job, so
 * nothing should listen to it: a listener per job would never be called and, with more than ten
 * at once, Node warns about a leak.
 */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal;

/** Whether listening to `signal` can ever be useful. */
export function canAbort(signal: AbortSignal): boolean {
  return signal !== NEVER_ABORTED;
}
