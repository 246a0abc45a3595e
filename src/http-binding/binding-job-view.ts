import { shownState, type JobRow } from '../job-state/job-lifecycle.js';
import type { PushedJob } from './envelope-cache.js';

/**
 * A job as the binding answers it (`{ "job": ... }` of PUSH, INFO, CANCEL; spec/ojs-core.md
 * section 5): the store's row (state, attempt, times, errors, result) over the envelope pushed
 * here, when this server still has it. A field with no value is left out, not `null` (the suite
 * checks `started_at` absent on a waiting job). `attempt` counts started attempts: 0 until fetched.
 */
export function bindingJobView(row: JobRow | undefined, pushed: PushedJob | undefined, now: number = Date.now()): Record<string, unknown> {
  const job = pushed?.job;
  const view: Record<string, unknown> = { ...pushed?.extensions };
  const set = (key: string, value: unknown): void => {
    if (value !== undefined && value !== null) view[key] = value;
  };
  set('specversion', job?.specversion);
  set('id', row?.id ?? job?.id);
  set('type', row?.type ?? job?.type);
  set('queue', row?.queue ?? job?.queue);
  set('args', job?.args);
  set('meta', job?.meta);
  set('priority', pushed?.priority);
  set('tenant', row?.tenant ?? job?.tenant);
  const state = row === undefined ? waitingState(job?.scheduled_at, now) : shownState(row, now);
  set('state', state);
  set('attempt', row === undefined || row.outcome === 'created' ? 0 : row.attempt);
  set('created_at', row?.created_at ?? job?.created_at);
  set('enqueued_at', row?.enqueued_at ?? row?.created_at ?? job?.created_at);
  set('scheduled_at', row?.scheduled_at ?? job?.scheduled_at);
  set('started_at', row?.started_at);
  set('completed_at', row?.completed_at);
  set('cancelled_at', row?.cancelled_at ?? (state === 'cancelled' ? row?.cancel_requested : undefined));
  if (row !== undefined && row.errors.length > 0) {
    view.errors = row.errors;
    if (state !== 'completed') view.error = row.errors.at(-1);
  }
  set('result', row?.result);
  set('timeout', job?.timeout);
  set('retry', job?.retry);
  return view;
}

function waitingState(scheduledAt: string | undefined, now: number): 'scheduled' | 'available' {
  return scheduledAt !== undefined && Date.parse(scheduledAt) > now ? 'scheduled' : 'available';
}
