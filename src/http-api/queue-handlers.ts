import { inspectQueues } from '../inspect/inspect-queues.js';
import { setQueueState } from '../queue-state/set-queue-state.js';
import type { QueueState } from '../queue-state/queue-state.js';
import type { AdminContext } from './admin-context.js';
import { reportsOf, tenantsOf } from './queue-lookup.js';
import { configView, stateView, statsView } from './queue-views.js';
import { checkScope, queueName, tenantParam, variantParam } from './request-params.js';
import type { ApiRequest, ApiResponse } from './router.js';

/**
 * `GET /ojs/v1/queues[?tenant=T]`: every logical queue, configured or found on the broker, with
 * its state and a summary of its statistics and settings. With `?tenant=`, that tenant's queues.
 */
export async function listQueues(ctx: AdminContext, { query }: ApiRequest): Promise<ApiResponse> {
  const tenant = tenantParam(query);
  const config = await ctx.configFile.load();
  const reports = await inspectQueues(config, { api: ctx.api(config), ...(tenant === undefined ? {} : { tenant }) });
  const names = new Set<string>(reports.map((r) => r.queue));
  // Configured queues are listed before their first declaration too (a shared one has no tenant).
  for (const [name, queue] of config.queues) if (tenant === undefined || queue.scope === 'tenant') names.add(name);
  const queues = [...names].sort().map((name) => {
    const own = reports.filter((r) => r.queue === name);
    const { state, drained, states } = stateView(own);
    const settings = configView(config, name, tenant);
    return {
      name,
      scope: config.queues.get(name)?.scope ?? own[0]?.scope ?? config.defaultQueue.scope,
      configured: config.queues.has(name),
      state,
      drained,
      states,
      physical_queues: own.length,
      ...(tenant === undefined ? { tenants: tenantsOf(own) } : {}),
      stats: statsView(own),
      config: { max_size: settings.max_size, overflow_policy: settings.overflow_policy },
    };
  });
  return { status: 200, body: { queues, ...(tenant === undefined ? {} : { tenant }) } };
}

/**
 * `GET /ojs/v1/queues/{name}[?tenant=T]`: state, configuration and statistics, with every
 * physical queue. A tenant-scoped queue without `?tenant=` is answered for all its tenants at
 * once: `state` is theirs when they agree and `mixed` otherwise, `stats` are summed, `tenants`
 * lists them, and `queues` has each physical queue with its own state and counts.
 */
export async function queueDetails(ctx: AdminContext, { params, query }: ApiRequest): Promise<ApiResponse> {
  const name = queueName(params);
  const tenant = tenantParam(query);
  const config = await ctx.configFile.load();
  checkScope(config, name, tenant);
  const reports = await reportsOf(ctx, config, name, tenant);
  const { state, drained, states } = stateView(reports);
  return {
    status: 200,
    body: {
      name,
      ...(tenant === undefined ? {} : { tenant }),
      scope: config.queues.get(name)?.scope ?? reports[0]?.scope ?? config.defaultQueue.scope,
      configured: config.queues.has(name),
      state,
      drained,
      states,
      ...(tenant === undefined ? { tenants: tenantsOf(reports) } : {}),
      config: configView(config, name, tenant),
      stats: statsView(reports),
      queues: reports,
    },
  };
}

const STATE_OF = { pause: 'paused', resume: 'active', drain: 'draining' } as const satisfies Record<string, QueueState>;

/**
 * `POST /ojs/v1/queues/{name}/pause|resume|drain[?tenant=T][&variant=V]` (and ojs-admin-api's
 * `POST /ojs/v1/admin/queues/{name}/pause|resume`): the queue's state, kept
 * on the broker as `stagecoach pause|resume|drain` keeps it (setQueueState). Without `?tenant=`,
 * a tenant-scoped queue changes for every configured tenant. A queue that does not exist yet is
 * made (OJS implicit creation) in that state, so that it is paused before its first job.
 */
export function changeState(action: keyof typeof STATE_OF) {
  return async (ctx: AdminContext, { params, query }: ApiRequest): Promise<ApiResponse> => {
    const name = queueName(params);
    const tenant = tenantParam(query);
    const variant = variantParam(query);
    return ctx.serializer.run(async () => {
      const config = await ctx.configFile.load();
      checkScope(config, name, tenant);
      // A queue with no job yet is paused before its first job (OJS implicit creation: setQueueState declares it).
      const target = { queue: name, ...(tenant === undefined ? {} : { tenant }), ...(variant === undefined ? {} : { variant }) };
      const results = await setQueueState(config, target, STATE_OF[action], ctx.log);
      ctx.log.info('queue state changed through the admin API', { ...target, state: STATE_OF[action] });
      return {
        status: 200,
        body: {
          name,
          ...(tenant === undefined ? {} : { tenant }),
          ...(variant === undefined ? {} : { variant }),
          state: STATE_OF[action],
          // ojs-admin-api 6.3's shape (`POST /ojs/v1/admin/queues/{name}/pause` answers the same).
          paused: STATE_OF[action] === 'paused',
          ...(action === 'pause' ? { paused_at: new Date().toISOString() } : {}),
          // The shape of the OJS HTTP binding's queue operations (conformance level 4).
          queue: { name, state: STATE_OF[action], paused: STATE_OF[action] === 'paused' },
          queues: results.map((r) => ({
            name: r.physicalQueue,
            ...(r.tenant === undefined ? {} : { tenant: r.tenant }),
            ...(r.variant === undefined ? {} : { variant: r.variant }),
            state: r.state,
          })),
        },
      };
    });
  };
}
