import { batchState, jobState, type TrackedBatch, type TrackedJob } from './batch-fold.js';

/**
 * `batch status --json` and `GET /ojs/v1/batches/{id}`: the docs/batches.md "Status" shape (`id`,
 * `tenant`, `state`, `jobs` = the counts) followed by what else the fold knows of the batch. Field
 * by field, so that nothing the fold keeps for itself leaks into the output; one function, so the
 * command line and the admin API can never print different JSON.
 */
export function batchView(batch: TrackedBatch): Record<string, unknown> {
  return {
    id: batch.id,
    tenant: batch.tenant ?? null,
    state: batchState(batch),
    jobs: { ...batch.counts },
    announced: batch.announced,
    cancelled: batch.cancelled,
    paused: batch.paused,
    refused: batch.refused,
    conflicts: batch.conflicts,
    // The names of the callbacks its roots declared (docs/batches.md, Callbacks).
    callbacks: Object.keys(batch.callbacks ?? {}),
    first_seen: batch.first_seen,
    last_seen: batch.last_seen,
  };
}

/** `job status --json` and `GET /ojs/v1/jobs/{id}`: a batched job's state, attempts, stage, error, children and history. */
export function jobView(job: TrackedJob): JobView {
  const last = job.reports.at(-1);
  const error = [...job.reports].reverse().find((report) => report.error !== undefined)?.error;
  return {
    id: job.id,
    batch: job.batch,
    tenant: job.tenant ?? null,
    type: job.type ?? null,
    queue: job.queue ?? null,
    state: jobState(job),
    outcome: job.final?.outcome ?? null,
    attempts: Math.max(0, ...job.reports.map((report) => report.attempt)),
    stage: last?.stage ?? null,
    error: error ?? null,
    parent: job.parent ?? null,
    children: [...job.children],
    conflict: job.conflict,
    history: job.reports.map((report) => ({
      at: report.at,
      stage: report.stage,
      outcome: report.outcome,
      attempt: report.attempt,
      ...(job.retracted.has(report.id) ? { retracted: true } : {}),
    })),
  };
}

export interface JobView {
  id: string;
  batch: string;
  tenant: string | null;
  type: string | null;
  queue: string | null;
  state: ReturnType<typeof jobState>;
  outcome: string | null;
  attempts: number;
  stage: string | null;
  error: { type: string; message: string } | null;
  parent: string | null;
  children: string[];
  conflict: boolean;
  history: Array<{ at: string; stage: string; outcome: string; attempt: number; retracted?: true }>;
}

/**
 * One job in a list of a batch's jobs (`GET /ojs/v1/batches/{id}/jobs`): its `job status` view
 * without the history, and with the number of its children rather than their ids, so that a page
 * of a large batch stays small. The whole view is one `GET /ojs/v1/jobs/{id}` away.
 */
export function jobSummary(job: TrackedJob): JobSummary {
  const view: Omit<JobView, 'history'> & { history?: unknown } = jobView(job);
  delete view.history;
  return { ...view, children: view.children.length };
}

export type JobSummary = Omit<JobView, 'history' | 'children'> & { children: number };
