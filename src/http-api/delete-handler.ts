import { deleteLogicalQueue } from '../removal/delete-queue.js';
import { STRATEGIES, type RemovalStrategy } from '../removal/remove-queues.js';
import { withCommandEvents } from '../events/command-events.js';
import type { Retirement } from '../removal/retire-tenant.js';
import type { RawConfig, TenantConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { readJsonObject } from './request-body.js';
import { queueName, tenantParam } from './request-params.js';
import type { ApiRequest, ApiResponse } from './router.js';

/**
 * `DELETE /ojs/v1/queues/{name}[?tenant=T]` with `{ "strategy": "reject"|"discard"|"move",
 * "target_queue"? }` (OJS queue configuration 5.3): removes the logical queue from the broker with
 * the removal code of `stagecoach queue delete`, and, for the whole queue, its entry (and every
 * tenant's own settings of it) from the configuration file, so that neither `provision` nor `plan`
 * brings it back. Done when answered (200, `state: "deleted"`), not accepted for later (202).
 *
 * Refused with 409: a queue a configured stage reads or writes (its stages would declare it
 * again), one tenant's part of a configured queue (`provision` declares it for every configured
 * tenant), a queue with consumers, and `reject` while jobs remain (nothing is touched then).
 */
export async function deleteQueue(ctx: AdminContext, { params, query, req }: ApiRequest): Promise<ApiResponse> {
  const name = queueName(params);
  const tenant = tenantParam(query);
  const body = await readJsonObject(req);
  const strategy = body.strategy;
  if (typeof strategy !== 'string' || !(STRATEGIES as readonly string[]).includes(strategy)) {
    throw new ApiError(400, 'INVALID_REQUEST', `"strategy" must be one of ${STRATEGIES.join(', ')}`, { strategies: [...STRATEGIES] });
  }
  const target = body.target_queue;
  if (target !== undefined && typeof target !== 'string') throw new ApiError(400, 'INVALID_REQUEST', '"target_queue" must be a string');
  if ((strategy === 'move') !== (target !== undefined)) {
    throw new ApiError(400, 'INVALID_REQUEST', '"target_queue" is required with strategy "move", and only with it');
  }

  return ctx.serializer.run(async () => {
    const raw = await ctx.configFile.readRaw();
    const config = ctx.configFile.compile(raw);
    const user = ctx.stages.find((stage) => stage.input === name || stage.outputs.includes(name));
    if (user !== undefined) {
      throw new ApiError(
        409,
        'CONFLICT',
        `queue "${name}" is used by stage "${user.name}": remove it from the stages first, or they declare it again`,
      );
    }
    const configured = config.queues.has(name);
    if (configured && tenant !== undefined) {
      throw new ApiError(
        409,
        'CONFLICT',
        `queue "${name}" is configured: provision declares it for every configured tenant; delete the whole queue (no ?tenant=)`,
      );
    }
    // The removal code refuses a configured queue: it is judged against the configuration without it.
    const without = tenant === undefined ? withoutQueue(raw, name) : raw;
    let result: Retirement | undefined;
    try {
      const judged = ctx.configFile.compile(without);
      result = await withCommandEvents(judged, 'admin', ctx.log, (onEvent) =>
        deleteLogicalQueue(judged, ctx.stages, name, tenant, ctx.log, {
          strategy: strategy as RemovalStrategy,
          ...(target === undefined ? {} : { target }),
          api: ctx.api(config),
          onEvent,
        }),
      );
    } catch (err) {
      // A configured queue never declared (no tenant yet) has nothing on the broker: only its entry goes.
      if (!(configured && err instanceof StagecoachError && err.code === 'NOT_FOUND')) throw err;
    }
    if (result !== undefined && !result.removed) {
      const remaining = result.queues.reduce((sum, q) => sum + q.jobs - q.discarded - q.moved, 0);
      throw new ApiError(409, 'CONFLICT', `queue "${name}" was not removed: ${result.reason ?? 'jobs remain'}`, {
        strategy,
        jobs_remaining: remaining,
        queues: result.queues.map((q) => ({ name: q.name, jobs: q.jobs, ids: q.ids, kept: q.kept, deleted: q.deleted })),
      });
    }
    if (configured) await ctx.configFile.write(without);
    const affected = result?.queues.reduce((sum, q) => sum + q.discarded + q.moved, 0) ?? 0;
    ctx.log.info('queue deleted through the admin API', { queue: name, tenant, strategy, jobs_affected: affected });
    return {
      status: 200,
      body: {
        queue: name,
        ...(tenant === undefined ? {} : { tenant }),
        strategy,
        ...(target === undefined ? {} : { target_queue: target }),
        jobs_affected: affected,
        state: 'deleted',
        configuration_removed: configured,
        queues: result?.queues ?? [],
        policies: result?.policies ?? [],
      },
    };
  });
}

/** The file without `queues.<name>` and without any tenant's own settings of it. */
function withoutQueue(raw: RawConfig, name: string): RawConfig {
  const queues = { ...raw.queues };
  delete queues[name];
  const tenants = raw.tenants?.map((entry): string | TenantConfig => {
    if (typeof entry === 'string' || entry.queues?.[name] === undefined) return entry;
    const own = { ...entry.queues };
    delete own[name];
    return { ...entry, queues: own };
  });
  return { ...raw, queues, ...(tenants === undefined ? {} : { tenants }) };
}
