import type { JobState } from '../job-state/job-lifecycle.js';
import { shownState } from '../job-state/job-lifecycle.js';
import { MAX_JOB_PAGE } from '../job-state/job-filter.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { tenantOf, visibleJobs } from './http-binding/request-tenant.js';
import { confinePool, poolsOf, type PoolView } from './pool-views.js';
import { queuePoolView } from '../queue-pools/queue-pool.js';
import type { ApiRequest, ApiResponse } from './router.js';

/** Most tracked jobs one statistics request reads per pool: beyond it the counts say `truncated`. */
const MAX_SCANNED_JOBS = 10 * MAX_JOB_PAGE;

/**
 * `GET /ojs/v1/admin/pools` (ojs-fair-scheduling 10.1): the pooled share of every stage reading
 * a tenant-scoped queue (pool-views.ts, `kind: "stage"`), then the queue pools of HTTP workers
 * (queue-pool-handlers.ts, `kind: "queues"`). A tenant's token sees its own place in each stage
 * pool only; so does the admin naming a tenant in `X-OJS-Tenant`. A queue pool holds no tenant's
 * data: every caller sees it whole, as its workers need to.
 */
export async function listPools(ctx: AdminContext, request: ApiRequest): Promise<ApiResponse> {
  const tenant = tenantOf(request);
  const stagePools = poolsOf(await ctx.configFile.load(), ctx.stages).map((pool) => confinePool(pool, tenant));
  const queuePools = [...(await ctx.schedules.book()).queuePools.values()]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map(queuePoolView);
  const pools = [...stagePools, ...queuePools];
  return { status: 200, body: { items: pools, pagination: { total: pools.length } } };
}

/** `GET /ojs/v1/admin/pools/{name}`: one queue pool, or one stage's pool; 404 when neither has that name. */
export async function getPool(ctx: AdminContext, request: ApiRequest): Promise<ApiResponse> {
  const name = request.params.name ?? '';
  const queuePool = (await ctx.schedules.book()).queuePools.get(name);
  if (queuePool !== undefined) return { status: 200, body: { pool: queuePoolView(queuePool) } };
  return { status: 200, body: { pool: confinePool(await poolNamed(ctx, name), tenantOf(request)) } };
}

async function poolNamed(ctx: AdminContext, name: string): Promise<PoolView> {
  const pool = poolsOf(await ctx.configFile.load(), ctx.stages).find((candidate) => candidate.name === name);
  if (pool === undefined)
    throw new ApiError(
      404,
      'NOT_FOUND',
      `no pool "${name}": a pool is a configured stage reading a tenant-scoped queue (docs/pooled-workers.md), or a queue pool defined with PUT /ojs/v1/admin/pools/{name}`,
    );
  return pool;
}

/** Jobs of one tenant in a pool's queue now: running, and waiting for a slot. */
interface TenantLoad {
  active: number;
  waiting: number;
}

/**
 * `GET /ojs/v1/admin/scheduling/stats` (ojs-fair-scheduling 10.2): for each pool, each tenant's
 * configured share and what the share gives it while every tenant has work (`busy_slots`), beside
 * its jobs running and waiting in the stage's queue now, from the job store: a tenant holding
 * fewer than its `busy_slots` has no more work, or the pool has slots to spare. `queues` has the
 * same per queue. A tenant's token (or `X-OJS-Tenant`) counts its own tenant only.
 */
export async function schedulingStats(ctx: AdminContext, request: ApiRequest): Promise<ApiResponse> {
  const tenant = tenantOf(request);
  const store = visibleJobs(await ctx.jobs(), request);
  const pools = poolsOf(await ctx.configFile.load(), ctx.stages).map((pool) => confinePool(pool, tenant));
  const now = Date.now();
  const views = [];
  for (const pool of pools) {
    const loads = new Map<string, TenantLoad>();
    let truncated = false;
    for (const state of ['active', 'available'] as const satisfies readonly JobState[]) {
      let cursor: string | undefined;
      let scanned = 0;
      do {
        const page = await store.list(
          { queue: pool.queues[0], state, ...(tenant === undefined ? {} : { tenant }) },
          { limit: MAX_JOB_PAGE, ...(cursor === undefined ? {} : { cursor }) },
        );
        for (const row of page.jobs) {
          const shown = shownState(row, now);
          if (shown !== 'active' && shown !== 'available') continue;
          const load = loads.get(row.tenant ?? '') ?? { active: 0, waiting: 0 };
          if (shown === 'active') load.active++;
          else load.waiting++;
          loads.set(row.tenant ?? '', load);
        }
        scanned += page.jobs.length;
        cursor = page.next_cursor;
      } while (cursor !== undefined && scanned < MAX_SCANNED_JOBS);
      truncated ||= cursor !== undefined;
    }
    const sum = (field: keyof TenantLoad): number => [...loads.values()].reduce((total, load) => total + load[field], 0);
    views.push({
      name: pool.name,
      queue: pool.queues[0],
      concurrency: pool.concurrency,
      active_jobs: sum('active'),
      waiting_jobs: sum('waiting'),
      ...(truncated ? { truncated: true } : {}),
      tenants: pool.tenants.map((entry) => ({
        tenant_id: entry.tenant_id,
        weight: entry.weight,
        busy_slots: entry.busy_slots,
        active_jobs: loads.get(entry.tenant_id)?.active ?? 0,
        waiting_jobs: loads.get(entry.tenant_id)?.waiting ?? 0,
      })),
    });
  }
  return {
    status: 200,
    body: {
      stats: { pools: views },
      queues: views.map((view) => ({ name: view.queue, pool: view.name, active_jobs: view.active_jobs, waiting_jobs: view.waiting_jobs })),
      computed_at: new Date(now).toISOString(),
    },
  };
}
