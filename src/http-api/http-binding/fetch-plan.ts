import { ApiError } from '../api-error.js';
import type { ApiRequest } from '../router.js';
import type { Job } from '../../job/job.types.js';
import { QueuePicker } from '../../queue-pools/queue-picker.js';
import { readPoolPlan, type PoolPlan } from '../../queue-pools/queue-pool.js';
import { isQueueName, QUEUE_NAME_RULE } from '../../util/queue-name.js';
import type { BindingContext } from './binding-context.js';
import type { Held } from './claim-board.js';
import type { RemoteQueue } from './remote-stages.js';
import { tenantOf } from './request-tenant.js';

/** Most queues one fetch may name: each one served is a runner this server holds. */
export const MAX_FETCH_QUEUES = 16;

/** The queues a fetch serves, and the picker that spreads its jobs over them. */
export interface FetchPlan {
  queues: string[];
  picker: QueuePicker;
}

/**
 * What a fetch body asks for (ojs-fair-scheduling 5.2): `pool`, a queue pool's name, whose queues,
 * strategy and weights hold whatever else the body says (server-side configuration takes
 * precedence); else `queues`, in the worker's `strategy` with its `weights` when it names them,
 * and in order (`strict`) when it names neither. Pickers are kept per tenant (PickerCache), so a
 * turn carries over from one fetch to the next and one tenant's fetches never move another's.
 */
export async function fetchPlanOf(ctx: BindingContext, body: Record<string, unknown>, request: ApiRequest): Promise<FetchPlan> {
  const scope = tenantOf(request) ?? '';
  if (body.pool !== undefined) {
    if (typeof body.pool !== 'string' || body.pool === '')
      throw new ApiError(400, 'INVALID_REQUEST', '"pool" must be the name of a queue pool');
    const pool = (await ctx.admin.schedules.book()).queuePools.get(body.pool);
    if (pool === undefined)
      throw new ApiError(
        400,
        'INVALID_REQUEST',
        `"pool": no queue pool "${body.pool.slice(0, 140)}" is defined (PUT /ojs/v1/admin/pools/{name})`,
      );
    return { queues: pool.queues, picker: ctx.pickers.of(pool, `pool:${scope}`) };
  }
  const queues = body.queues;
  if (!Array.isArray(queues) || queues.length === 0 || queues.length > MAX_FETCH_QUEUES) {
    throw new ApiError(
      400,
      'INVALID_REQUEST',
      `"queues" must be an array of 1 to ${MAX_FETCH_QUEUES} queue names (or "pool" a queue pool's name)`,
    );
  }
  const bad = queues.find((queue) => !isQueueName(queue));
  if (bad !== undefined) {
    throw new ApiError(400, 'INVALID_REQUEST', `"queues": ${JSON.stringify(bad)} is not a queue name (${QUEUE_NAME_RULE})`);
  }
  const listed = [...new Set(queues as string[])];
  if (body.strategy === undefined && body.weights === undefined)
    return { queues: listed, picker: new QueuePicker({ strategy: 'strict', queues: listed, weights: {} }) };
  const plan: PoolPlan = readPoolPlan(
    { queues: listed, strategy: body.strategy, weights: body.weights },
    body.weights === undefined ? 'strict' : 'weighted',
  );
  return { queues: plan.queues, picker: ctx.pickers.of(plan, `worker:${scope}`) };
}

/**
 * Claims up to `count` jobs from the served queues as the plan's picker chooses them, one job at
 * a time; a strict plan takes them in order, as many from a queue as it has before the next.
 */
export function claimPlanned(
  ctx: BindingContext,
  plan: FetchPlan,
  served: readonly RemoteQueue[],
  count: number,
  worker: string,
  visibilityOf: (job: Job) => number,
): Held[] {
  if (plan.picker.plan.strategy === 'strict')
    return ctx.board.claim(
      served.map((remote) => remote.key),
      count,
      worker,
      visibilityOf,
    );
  const keys = new Map(served.map((remote) => [remote.queue, remote.key]));
  const hasJob = (queue: string): boolean => {
    const key = keys.get(queue);
    return key !== undefined && ctx.board.waitingOn(key) > 0;
  };
  const taken: Held[] = [];
  // Each turn takes a waiting job off a line (handed out, or discarded as expired): it ends.
  while (taken.length < count) {
    const queue = plan.picker.next(hasJob);
    if (queue === undefined) break;
    taken.push(...ctx.board.claim([keys.get(queue) as string], 1, worker, visibilityOf));
  }
  return taken;
}

/**
 * A served queue whose jobs are on their way to this server (none waiting on the board, some
 * ready for it): the fetch waits for them, within its deadline, rather than hand out another
 * queue's. A strict plan waits for the queues before the first with a job waiting; the others for
 * any queue of the plan, so that its turn is not skipped for a job still in flight.
 */
export async function comingFor(ctx: BindingContext, plan: FetchPlan, served: readonly RemoteQueue[]): Promise<RemoteQueue | undefined> {
  const strict = plan.picker.plan.strategy === 'strict';
  for (const remote of served) {
    if (ctx.board.waitingOn(remote.key) > 0) {
      if (strict) return undefined;
      continue;
    }
    if (await ctx.remote.readyFor([remote])) return remote;
  }
  return undefined;
}
