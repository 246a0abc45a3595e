import { shownState, type AttemptError, type JobRow, type JobState } from './job-lifecycle.js';

/**
 * One job as `job status <id> --json` prints it and `GET /ojs/v1/jobs/{id}` answers (OJS job
 * fields, seeds/003; `result` per spec/ojs-results.md): every field present, `null` when unknown.
 */
export interface JobStateView {
  id: string;
  state: JobState;
  type: string | null;
  queue: string | null;
  tenant: string | null;
  batch: string | null;
  tags: string[];
  attempt: number;
  stage: string | null;
  /** The raw outcome behind the state (`dead`, `suspect`, `retrying`, `started`, `created`...). */
  outcome: string;
  parent_id: string | null;
  children: string[];
  errors: AttemptError[];
  result: unknown;
  created_at: string | null;
  enqueued_at: string | null;
  scheduled_at: string | null;
  started_at: string | null;
  completed_at: string | null;
  cancelled_at: string | null;
  /** 0.0 to 1.0 (`ctx.progress`), 1 once completed; present only when the job reported progress. */
  progress?: number | null;
  progress_message?: string;
}

export function jobStateView(row: JobRow, now: number = Date.now()): JobStateView {
  return {
    id: row.id,
    state: shownState(row, now),
    type: row.type ?? null,
    queue: row.queue ?? null,
    tenant: row.tenant ?? null,
    batch: row.batch ?? null,
    tags: row.tags ?? [],
    attempt: row.attempt,
    stage: row.stage ?? null,
    outcome: row.outcome,
    parent_id: row.parent_id ?? null,
    children: row.children,
    errors: row.errors,
    result: row.result ?? null,
    created_at: row.created_at ?? null,
    enqueued_at: row.enqueued_at ?? null,
    scheduled_at: row.scheduled_at ?? null,
    started_at: row.started_at ?? null,
    completed_at: row.completed_at ?? null,
    cancelled_at: row.cancelled_at ?? row.cancel_requested ?? null,
    ...progressOf(row),
  };
}

/** spec/ojs-progress.md 8: a completed job that reported progress is done; a failed one keeps its last. */
function progressOf(row: JobRow): Pick<JobStateView, 'progress' | 'progress_message'> {
  const known = row.progress;
  if (known === undefined) return {};
  return {
    progress: row.state === 'completed' ? 1 : known.value,
    ...(known.message === undefined ? {} : { progress_message: known.message }),
  };
}
