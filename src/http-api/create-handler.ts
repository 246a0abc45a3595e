import { openConnection } from '../broker/amqp-connection.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { QueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { coreTopology, mergeTopologies, provisionedQueueTopology } from '../topology/build-topology.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { configView } from './queue-views.js';
import { readJsonObject } from './request-body.js';
import { queueName } from './request-params.js';
import type { ApiRequest, ApiResponse } from './router.js';
import { withCommandEvents } from '../events/command-events.js';
import { syncQueueSettings } from '../plan/queue-settings.js';

/**
 * `POST /ojs/v1/queues` with `{ "name", "config"? }` (OJS queue configuration 5.2, 9.2): explicit creation.
 * Once the configuration with the queue compiles, the queue is declared for every configured
 * tenant (or once, shared) and its settings put, as `provision` would, so jobs wait in it before
 * any stage runs; then it is added to the configuration file (written atomically). After an
 * error the file is as it was. A queue already configured is a 409.
 */
export async function createQueue(ctx: AdminContext, { req }: ApiRequest): Promise<ApiResponse> {
  const body = await readJsonObject(req);
  if (typeof body.name !== 'string') throw new ApiError(400, 'INVALID_REQUEST', '"name" (a string) is required');
  const name = queueName({ name: body.name });
  const own = body.config ?? {};
  if (typeof own !== 'object' || own === null || Array.isArray(own))
    throw new ApiError(400, 'INVALID_REQUEST', '"config" must be an object');

  return ctx.serializer.run(async () => {
    const raw = await ctx.configFile.readRaw();
    if (raw.queues?.[name] !== undefined) {
      throw new ApiError(409, 'CONFLICT', `queue "${name}" is configured already: change it with PUT /ojs/v1/queues/${name}/config`);
    }
    // Compiled first (a 422, nothing touched); the file is written last, once the broker has
    // the queue and its settings, so that a failure leaves it as it was (and a retry completes
    // what the broker holds of it: declarations are idempotent).
    const next = { ...raw, queues: { ...raw.queues, [name]: own as QueueConfig } };
    const config = ctx.configFile.compile(next);
    const queue = config.queues.get(name);
    if (queue === undefined) throw new Error(`queue "${name}" missing from its compiled configuration`);
    // Its dead_letter_queue too: dead letters routed to a queue nobody declared would be unroutable.
    const created = [queue, ...(queue.dead_letter_queue === undefined ? [] : [queueFor(config, queue.dead_letter_queue)])];
    const connection = await openConnection(config, ctx.log, 'stagecoach-admin');
    try {
      const parts = created.flatMap((q) =>
        q.scope === 'shared' ? [provisionedQueueTopology(config, q)] : config.tenants.map((t) => provisionedQueueTopology(config, q, t)),
      );
      await declareTopology(connection, mergeTopologies(coreTopology(config), ...parts), ctx.log);
    } finally {
      await connection.close().catch(() => undefined);
    }
    const policies = await withCommandEvents(config, 'admin', ctx.log, (onEvent) =>
      syncQueueSettings(config, ctx.stages, ctx.api(config), { removeStale: true, queues: [name], onEvent }),
    );
    await ctx.configFile.write(next);
    ctx.log.info('queue created through the admin API', { queue: name, policies });
    return {
      status: 201,
      body: { name, state: 'active', config: configView(config, name), created_at: new Date().toISOString() },
    };
  });
}
