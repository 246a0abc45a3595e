import { shownState, type JobRow } from '../../job-state/job-lifecycle.js';
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
  set('tags', row?.tags ?? job?.tags);
  set('tenant', row?.tenant ?? job?.tenant);
  const state = row === undefined ? (pushed?.pending === true ? 'pending' : waitingState(job?.scheduled_at, now)) : shownState(row, now);
  set('state', state);
  // OJS counts attempts made; the row counts the attempt it is at (the next one, while it waits).
  // A job that ended without starting this attempt (cancelled while it waited) made one fewer.
  set('attempt', row === undefined ? 0 : WAITING.has(state) || row.started_at === undefined ? row.attempt - 1 : row.attempt);
  set('max_attempts', job?.retry?.max_attempts ?? pushed?.maxAttempts);
  set('created_at', row?.created_at ?? job?.created_at);
  set('enqueued_at', row?.enqueued_at ?? row?.created_at ?? job?.created_at);
  set('scheduled_at', row?.scheduled_at ?? job?.scheduled_at);
  set('expires_at', job?.expires_at);
  set('started_at', row?.started_at);
  // A discarded job that ran ended too: its end is the time of the report that set its state
  // (one discarded unrun, expired before it started, never completed).
  set('completed_at', row?.completed_at ?? (state === 'discarded' && row?.started_at !== undefined ? row.key[1] : undefined));
  if (state === 'discarded') set('discarded_at', row?.key[1]);
  set('cancelled_at', row?.cancelled_at ?? (state === 'cancelled' ? row?.cancel_requested : undefined));
  if (row !== undefined && row.errors.length > 0) {
    // OJS error objects (spec/ojs-errors.md): the type is also the `code`, the time `occurred_at`.
    const errors = row.errors.map((error) => ({ ...error, code: error.type, occurred_at: error.at }));
    view.errors = errors;
    if (state !== 'completed') view.error = errors.at(-1);
  }
  set('result', row?.result);
  // Seconds (ojs-core), and in milliseconds as the binding's fetch example shows it: an SDK reads
  // one or the other (docs/http-binding.md, "The official SDKs").
  set('timeout', job?.timeout);
  set('timeout_ms', job?.timeout === undefined ? undefined : job.timeout * 1000);
  set('retry', job?.retry);
  // A workflow step's input (openapi.yaml Job.parent_results; docs/workflows.md).
  set('parent_results', job?.parent_results);
  // A native stage's `ctx.progress` (an HTTP worker's, kept by this server, is laid over it).
  if (row?.progress !== undefined) {
    view.progress = state === 'completed' ? 1 : row.progress.value;
    set('progress_message', row.progress.message);
  }
  return view;
}

const WAITING: ReadonlySet<string> = new Set(['available', 'scheduled', 'retryable', 'pending']);

function waitingState(scheduledAt: string | undefined, now: number): 'scheduled' | 'available' {
  return scheduledAt !== undefined && Date.parse(scheduledAt) > now ? 'scheduled' : 'available';
}
