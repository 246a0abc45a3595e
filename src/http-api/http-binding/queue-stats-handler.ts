import type { ApiRequest, ApiResponse } from '../router.js';
import { queueName } from '../request-params.js';
import { shownState, type JobRow, type JobState } from '../../job-state/job-lifecycle.js';
import { MAX_JOB_PAGE } from '../../job-state/job-filter.js';
import type { BindingContext } from './binding-context.js';
import { tenantOf, visibleJobs } from './request-tenant.js';
import { backpressureView } from '../backpressure-handlers.js';

/** A queue's counts by state, with the day's completions and failures (OJS queue configuration 9.3). */
export interface QueueCounts {
  available: number;
  active: number;
  scheduled: number;
  retryable: number;
  pending: number;
  completed: number;
  cancelled: number;
  discarded: number;
  completed_today: number;
  failed_today: number;
  /** Jobs waiting or running: available, active, scheduled, retryable and pending. */
  depth: number;
  /** The oldest tracked job's creation, the latest state change: null while the queue has none. */
  created_at: string | null;
  updated_at: string | null;
}

/**
 * `GET /ojs/v1/queues/{name}/stats` (binding 11.2, level 4): the queue's jobs by state, counted
 * from the job store as INFO shows them (a job claimed by an HTTP worker is `active` at once, one
 * pushed here and not yet folded is `available`), in the suite's shape (`queue` with the counts)
 * and the binding's (`stats`). A tenant's token counts its own tenant's jobs only; the admin
 * counts every tenant's, or the one `X-OJS-Tenant` names.
 */
export async function queueStats(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const name = queueName(request.params);
  const tenant = tenantOf(request);
  const counts = await countJobs(ctx, request, { queue: name, tenant });
  const config = await ctx.admin.configFile.load();
  // ojs-backpressure 8: the bound beside the depth (0: unbounded); a shared queue's is the queue's.
  const shared = (config.queues.get(name) ?? config.defaultQueue).scope === 'shared';
  const { max_depth } = backpressureView(config, name, shared ? undefined : tenant);
  return {
    status: 200,
    body: {
      queue: { name, ...(tenant === undefined ? {} : { tenant }), ...counts, max_depth },
      stats: { queue: name, ...counts, max_depth },
      created_at: counts.created_at,
      updated_at: counts.updated_at,
      computed_at: new Date().toISOString(),
    },
  };
}

/** Counts the tracked jobs of a queue, of a tenant, or of both, page by page (as the caller may see them). */
export async function countJobs(
  ctx: BindingContext,
  request: ApiRequest,
  { queue, tenant }: { queue?: string | undefined; tenant?: string | undefined },
): Promise<QueueCounts> {
  const store = visibleJobs(await ctx.admin.jobs(), request);
  const now = Date.now();
  const dayStart = new Date(now);
  dayStart.setUTCHours(0, 0, 0, 0);
  const today = dayStart.toISOString();
  const counts: QueueCounts = {
    available: 0,
    active: 0,
    scheduled: 0,
    retryable: 0,
    pending: 0,
    completed: 0,
    cancelled: 0,
    discarded: 0,
    completed_today: 0,
    failed_today: 0,
    depth: 0,
    created_at: null,
    updated_at: null,
  };
  const seen = new Set<string>();
  const count = (state: JobState, row: JobRow | undefined): void => {
    counts[state]++;
    const at = row?.key[1];
    if (at !== undefined && at >= today && state === 'completed') counts.completed_today++;
    if (at !== undefined && at >= today && state === 'discarded') counts.failed_today++;
    if (row?.created_at !== undefined && (counts.created_at === null || row.created_at < counts.created_at))
      counts.created_at = row.created_at;
    if (at !== undefined && (counts.updated_at === null || at > counts.updated_at)) counts.updated_at = at;
  };
  let cursor: string | undefined;
  do {
    const page = await store.list(
      { ...(queue === undefined ? {} : { queue }), ...(tenant === undefined ? {} : { tenant }) },
      { limit: MAX_JOB_PAGE, ...(cursor === undefined ? {} : { cursor }) },
    );
    for (const row of page.jobs) {
      seen.add(row.id);
      // Claimed here: active now, whether or not its `started` report has reached the store.
      count(ctx.board.claimOf(row.id) !== undefined && !isEnded(row) ? 'active' : shownState(row, now), row);
    }
    cursor = page.next_cursor;
  } while (cursor !== undefined);
  // Pushed here a moment ago, not folded into the store yet: waiting (PUSH answered it so).
  for (const pushed of ctx.envelopes.values()) {
    const { job } = pushed;
    if (seen.has(job.id) || (queue !== undefined && job.queue !== queue) || (tenant !== undefined && job.tenant !== tenant)) continue;
    if (request.caller?.kind === 'tenant' && job.tenant !== request.caller.tenant) continue;
    if (ctx.board.claimOf(job.id) !== undefined) count('active', undefined);
    else if (pushed.pending === true) count('pending', undefined);
    else count(job.scheduled_at !== undefined && Date.parse(job.scheduled_at) > now ? 'scheduled' : 'available', undefined);
    if (counts.created_at === null || job.created_at < counts.created_at) counts.created_at = job.created_at;
  }
  counts.depth = counts.available + counts.active + counts.scheduled + counts.retryable + counts.pending;
  return counts;
}

function isEnded(row: JobRow): boolean {
  return row.state === 'completed' || row.state === 'cancelled' || row.state === 'discarded';
}
