import type { BatchFold } from '../batch/batch-fold.js';
import { batchState } from '../batch/batch-fold.js';
import type { OverlapPolicy } from '../config/config.types.js';
import { ENDED_STATES, shownState } from '../job-state/job-lifecycle.js';
import type { JobStore } from '../job-state/job-store.js';
import { occurrenceBatch } from './occurrence-id.js';

/** What an occurrence does about the previous one's job (OJS cron 6). */
export type OverlapVerdict =
  | { kind: 'fire' }
  /** `skip`: the previous one is still going; nothing is enqueued. */
  | { kind: 'skip'; job: string }
  /** `cancel_previous`: cancel it, then enqueue. */
  | { kind: 'cancel'; job: string; batch?: string }
  /** `enqueue`: enqueue behind it; `waiting` when it has not even started (occurrences pile up). */
  | { kind: 'enqueue'; job: string; waiting: boolean };

/** Where overlap is read: the job store (and the batch fold, for `batch: true` schedules), up to date. */
export interface OverlapSources {
  jobs(): Promise<JobStore>;
  batches?(): Promise<BatchFold>;
}

/**
 * Whether the previous occurrence's job (for the same tenant) is still going: in the job store
 * and not completed, discarded or cancelled (waiting, scheduled, active or retrying count as
 * going). For a `batch: true` schedule, whether its batch is still open: any job of it in flight.
 * A job the store does not know (its queue's tracking is off, or it ended and was pruned) is not
 * going.
 */
export async function overlapVerdict(
  policy: OverlapPolicy,
  batch: boolean,
  previous: string | undefined,
  sources: OverlapSources,
): Promise<OverlapVerdict> {
  if (policy === 'allow' || previous === undefined) return { kind: 'fire' };
  let going = false;
  let waiting = false;
  if (batch && sources.batches !== undefined) {
    const known = (await sources.batches()).batch(occurrenceBatch(previous));
    going = known !== undefined && batchState(known) === 'running';
  }
  if (!going || policy === 'enqueue') {
    const row = await (await sources.jobs()).get(previous);
    if (row !== undefined) {
      const state = shownState(row);
      going ||= !ENDED_STATES.has(state);
      waiting = state === 'available' || state === 'scheduled' || state === 'pending';
    }
  }
  if (!going) return { kind: 'fire' };
  switch (policy) {
    case 'skip':
      return { kind: 'skip', job: previous };
    case 'cancel_previous':
      return { kind: 'cancel', job: previous, ...(batch ? { batch: occurrenceBatch(previous) } : {}) };
    case 'enqueue':
      return { kind: 'enqueue', job: previous, waiting };
  }
}
