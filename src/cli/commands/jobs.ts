import { cancelJob } from '../../batch/job-cancel.js';
import { readJobStore } from '../../batch/tracker.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { JOB_STATES, type JobState } from '../../job-state/job-lifecycle.js';
import type { JobStore } from '../../job-state/job-store.js';
import { jobStateView, type JobStateView } from '../../job-state/job-views.js';
import { createLogger } from '../../logging/logger.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/** Most jobs `job list` prints per page, and its default. */
export const MAX_JOB_PAGE = 1000;
export const DEFAULT_JOB_PAGE = 100;

/** `stagecoach job status <id> [--json]`: any tracked job (docs/job-state.md). */
export async function jobStatus(id: string, opts: { json?: boolean; config?: string }): Promise<number> {
  const view = await withStore(opts.config, async (store) => {
    const row = await store.get(id);
    if (row === undefined) throw new StagecoachError('NOT_FOUND', `no tracking report names job "${id}" (is its queue's tracking on?)`);
    return jobStateView(row);
  });
  if (opts.json) process.stdout.write(`${JSON.stringify(view)}\n`);
  else process.stdout.write(describe(view));
  return EXIT_OK;
}

export interface JobListOptions {
  tenant?: string;
  queue?: string;
  state?: string;
  type?: string;
  since?: string;
  limit?: string;
  cursor?: string;
  json?: boolean;
  config?: string;
}

/** `stagecoach job list [--tenant] [--queue] [--state] [--type] [--since] [--limit] [--cursor] [--json]`. */
export async function jobList(opts: JobListOptions): Promise<number> {
  const filter = jobFilter(opts);
  const limit = pageLimit(opts.limit);
  const page = await withStore(opts.config, (store) => store.list(filter, { limit, ...(opts.cursor === undefined ? {} : { cursor: opts.cursor }) }));
  const jobs = page.jobs.map((row) => jobStateView(row));
  if (opts.json) process.stdout.write(`${JSON.stringify({ jobs, next_cursor: page.next_cursor ?? null })}\n`);
  else {
    for (const job of jobs) {
      process.stdout.write(`${job.id}\t${job.tenant ?? '-'}\t${job.queue ?? '-'}\t${job.type ?? '-'}\t${job.state}\tattempt ${job.attempt}\n`);
    }
    process.stdout.write(`${jobs.length} job${jobs.length === 1 ? '' : 's'}${page.next_cursor === undefined ? '' : `; next page: --cursor ${page.next_cursor}`}\n`);
  }
  return EXIT_OK;
}

/** `stagecoach job cancel <id> [--json]`: exit 1 when the job is unknown, running or ended. */
export async function jobCancel(id: string, opts: { json?: boolean; config?: string }): Promise<number> {
  const config = await loadConfig(opts.config);
  const view = await cancelJob(config, id, createLogger({ service: 'stagecoach', command: 'job' }));
  if (opts.json) process.stdout.write(`${JSON.stringify(view)}\n`);
  else process.stdout.write(`job ${id} cancelled: a stage that meets it discards it unrun\n`);
  return EXIT_OK;
}

/** The filter of `job list` and `GET /ojs/v1/jobs`, checked. */
export function jobFilter(opts: Pick<JobListOptions, 'tenant' | 'queue' | 'state' | 'type' | 'since'>): {
  tenant?: string;
  queue?: string;
  state?: JobState;
  type?: string;
  since?: string;
} {
  if (opts.state !== undefined && !(JOB_STATES as readonly string[]).includes(opts.state)) {
    throw new StagecoachError('INVALID_REQUEST', `state: one of ${JOB_STATES.join(', ')}, got "${opts.state}"`);
  }
  let since: string | undefined;
  if (opts.since !== undefined) {
    const at = Date.parse(opts.since);
    if (Number.isNaN(at)) throw new StagecoachError('INVALID_REQUEST', `since: an ISO 8601 time, got "${opts.since}"`);
    since = new Date(at).toISOString();
  }
  return {
    ...(opts.tenant === undefined ? {} : { tenant: resolveTenant(opts.tenant) }),
    ...(opts.queue === undefined ? {} : { queue: opts.queue }),
    ...(opts.state === undefined ? {} : { state: opts.state as JobState }),
    ...(opts.type === undefined ? {} : { type: opts.type }),
    ...(since === undefined ? {} : { since }),
  };
}

/** A page size, 1..MAX_JOB_PAGE. */
export function pageLimit(value: string | undefined): number {
  if (value === undefined) return DEFAULT_JOB_PAGE;
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_JOB_PAGE) {
    throw new StagecoachError('INVALID_REQUEST', `limit: an integer from 1 to ${MAX_JOB_PAGE}, got "${value}"`);
  }
  return limit;
}

async function withStore<T>(configFile: string | undefined, use: (store: JobStore) => Promise<T>): Promise<T> {
  const config = await loadConfig(configFile);
  const store = await readJobStore(config, createLogger({ service: 'stagecoach', command: 'job' }));
  try {
    return await use(store);
  } finally {
    await store.close();
  }
}

function describe(view: JobStateView): string {
  const lines = [
    `job ${view.id} (${view.type ?? '?'} on ${view.queue ?? '?'}, tenant ${view.tenant ?? '-'}${view.batch === null ? '' : `, batch ${view.batch}`}): ${view.state}, attempt ${view.attempt}, last at stage ${view.stage ?? '-'}`,
    `  created ${view.created_at ?? '-'}, started ${view.started_at ?? '-'}, completed ${view.completed_at ?? '-'}${view.cancelled_at === null ? '' : `, cancelled ${view.cancelled_at}`}`,
    ...view.errors.map((error) => `  attempt ${error.attempt}: ${error.type}: ${error.message}`),
    ...(view.result === null ? [] : [`  result: ${JSON.stringify(view.result)}`]),
    `  parent: ${view.parent_id ?? '-'}; children: ${view.children.length === 0 ? '-' : view.children.join(', ')}`,
  ];
  return `${lines.join('\n')}\n`;
}
