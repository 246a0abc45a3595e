import { cancelJob } from '../../directives/cancel-job.js';
import { readJobStore } from '../../tracker/tracker.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { jobFilter, pageLimit } from '../../job-state/job-filter.js';
import type { JobStore } from '../../job-state/job-store.js';
import { jobStateView, type JobStateView } from '../../job-state/job-views.js';
import { createLogger } from '../../logging/logger.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

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
  tag?: string;
  since?: string;
  limit?: string;
  cursor?: string;
  json?: boolean;
  config?: string;
}

/** `stagecoach job list [--tenant] [--queue] [--state] [--type] [--tag] [--since] [--limit] [--cursor] [--json]`. */
export async function jobList(opts: JobListOptions): Promise<number> {
  const filter = jobFilter({ ...opts, ...(opts.tenant === undefined ? {} : { tenant: resolveTenant(opts.tenant) }) });
  const limit = pageLimit(opts.limit);
  const page = await withStore(opts.config, (store) =>
    store.list(filter, { limit, ...(opts.cursor === undefined ? {} : { cursor: opts.cursor }) }),
  );
  const jobs = page.jobs.map((row) => jobStateView(row));
  if (opts.json) process.stdout.write(`${JSON.stringify({ jobs, next_cursor: page.next_cursor ?? null })}\n`);
  else {
    for (const job of jobs) {
      process.stdout.write(
        `${job.id}\t${job.tenant ?? '-'}\t${job.queue ?? '-'}\t${job.type ?? '-'}\t${job.state}\tattempt ${job.attempt}${job.tags.length === 0 ? '' : `\ttags ${job.tags.join(',')}`}\n`,
      );
    }
    process.stdout.write(
      `${jobs.length} job${jobs.length === 1 ? '' : 's'}${page.next_cursor === undefined ? '' : `; next page: --cursor ${page.next_cursor}`}\n`,
    );
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

async function withStore<T>(configFile: string | undefined, use: (store: JobStore) => Promise<T>): Promise<T> {
  const config = await loadConfig(configFile);
  const store = await readJobStore(config, createLogger({ service: 'stagecoach', command: 'job' }));
  try {
    return await use(store);
  } finally {
    await store.close();
  }
}

function progressText(progress: number | null, message: string | undefined): string {
  const percent = progress === null ? '-' : `${Math.round(progress * 100)}%`;
  return message === undefined ? percent : `${percent} (${message})`;
}

function describe(view: JobStateView): string {
  const lines = [
    `job ${view.id} (${view.type ?? '?'} on ${view.queue ?? '?'}, tenant ${view.tenant ?? '-'}${view.batch === null ? '' : `, batch ${view.batch}`}): ${view.state}, attempt ${view.attempt}, last at stage ${view.stage ?? '-'}`,
    `  created ${view.created_at ?? '-'}, started ${view.started_at ?? '-'}, completed ${view.completed_at ?? '-'}${view.cancelled_at === null ? '' : `, cancelled ${view.cancelled_at}`}`,
    ...(view.progress === undefined ? [] : [`  progress: ${progressText(view.progress, view.progress_message)}`]),
    ...view.errors.map((error) => `  attempt ${error.attempt}: ${error.type}: ${error.message}`),
    ...(view.result === null ? [] : [`  result: ${JSON.stringify(view.result)}`]),
    `  parent: ${view.parent_id ?? '-'}; children: ${view.children.length === 0 ? '-' : view.children.join(', ')}`,
    ...(view.tags.length === 0 ? [] : [`  tags: ${view.tags.join(', ')}`]),
  ];
  return `${lines.join('\n')}\n`;
}
