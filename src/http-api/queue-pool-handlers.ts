import { checkPoolName, MAX_QUEUE_POOLS, queuePoolView, readPoolPlan, type QueuePool } from '../queue-pools/queue-pool.js';
import { scheduleRecord } from '../schedule/schedule-records.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { poolsOf } from './pool-views.js';
import { readJsonObject } from './request-body.js';
import type { ApiRequest, ApiResponse } from './router.js';

/**
 * The queue pools of HTTP workers (ojs-fair-scheduling 6, 10.1; docs/http-binding.md "Queue
 * pools"): the operator's, defined and removed with the admin token. They live in the schedules
 * stream, as webhook subscriptions do; a name is a stage pool's (the configuration's) or a queue
 * pool's, never both. Changes run one at a time with the configuration's (the admin API's
 * serializer), so the bound and the name checks still hold when the record is appended.
 */

/** `PUT /ojs/v1/admin/pools/{name}`: 201 `{ pool }` when new, 200 when redefined. */
export async function putQueuePool(ctx: AdminContext, request: ApiRequest): Promise<ApiResponse> {
  const name = checkPoolName(request.params.name ?? '');
  const body = await readJsonObject(request.req);
  if (body.name !== undefined && body.name !== name)
    throw new ApiError(
      400,
      'INVALID_REQUEST',
      `"name" must be the path's pool name "${name}", got ${JSON.stringify(body.name)?.slice(0, 140)}`,
    );
  const plan = readPoolPlan(body);
  return ctx.serializer.run(async () => {
    if (poolsOf(await ctx.configFile.load(), ctx.stages).some((pool) => pool.name === name))
      throw new ApiError(409, 'CONFLICT', `"${name}" is a stage pool of the configuration (docs/pooled-workers.md): choose another name`);
    const book = await ctx.schedules.book();
    const known = book.queuePools.get(name);
    if (known === undefined && book.queuePools.size >= MAX_QUEUE_POOLS)
      throw new ApiError(409, 'CONFLICT', `${MAX_QUEUE_POOLS} queue pools are defined, the most there may be: delete one first`);
    const now = new Date().toISOString();
    const pool: QueuePool = { name, ...plan, created_at: known?.created_at ?? now, updated_at: now };
    await ctx.schedules.append(scheduleRecord({ kind: 'pool', pool }));
    return { status: known === undefined ? 201 : 200, body: { pool: queuePoolView(pool) } };
  });
}

/** `DELETE /ojs/v1/admin/pools/{name}`: `{ pool, deleted: true }`; fetches naming it are refused from then on. */
export function deleteQueuePool(ctx: AdminContext, request: ApiRequest): Promise<ApiResponse> {
  const name = request.params.name ?? '';
  return ctx.serializer.run(async () => {
    const pool = (await ctx.schedules.book()).queuePools.get(name);
    if (pool === undefined) {
      const stage = poolsOf(await ctx.configFile.load(), ctx.stages).some((candidate) => candidate.name === name);
      throw stage
        ? new ApiError(409, 'CONFLICT', `"${name}" is a stage pool: it is removed from the configuration, not here`)
        : new ApiError(404, 'NOT_FOUND', `no queue pool "${name}"`);
    }
    await ctx.schedules.append(scheduleRecord({ kind: 'unpool', name }));
    return { status: 200, body: { pool: queuePoolView(pool), deleted: true } };
  });
}
