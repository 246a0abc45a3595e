import {
  listDeadLetters,
  purgeDeadLetters,
  retryDeadLetters,
  deadQueuesOf,
  type DeadLetterEntry,
} from '../dead-letters/dead-letter-actions.js';
import { listUnroutable, replayUnroutable, type UnroutableEntry } from '../dead-letters/unroutable.js';
import { OJS_HEADERS } from '../job/amqp-mapping.js';
import { BrokerNames } from '../topology/names.js';
import type { DashboardContext, DashboardRequest, DashboardRoute } from './dashboard-context.js';
import { DashboardRequestError, missingQueueOf, orQueueMissing } from './dashboard-errors.js';
import { flagOf, integerOf, queueOf, sortOf, tenantOf } from './dashboard-params.js';
import { limitList } from './limit-list.js';
import { messageRef } from './message-ref.js';
import { MAX_SCAN, peekMessage } from './peek-message.js';
import { QueueSnapshots } from './queue-snapshot.js';
import { buildMatrix, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './tenant-matrix.js';

/** How many messages a list shows unless `?limit=` says otherwise. */
const DEFAULT_LIST = 100;

/**
 * The API routes the dashboard needs beside the admin API's (queues, states, configuration):
 *
 * | route | token | answer |
 * | --- | --- | --- |
 * | `GET /ojs/v1/dashboard/matrix?filter=&problems=&sort=&offset=&limit=` | | one page of the tenants x queues matrix (tenant-matrix.ts), with the broker's resource `alarms` and flow `limits` (limit-list.ts) |
 * | `GET /ojs/v1/queues/{name}/dead-letters?tenant=&limit=` | | dead letters, each with its error and attempt, without bodies |
 * | `GET /ojs/v1/queues/{name}/dead-letters/{ref}?tenant=` | | one dead letter with its headers and body (and its payload's arguments, sent by reference) |
 * | `POST /ojs/v1/queues/{name}/dead-letters/retry?tenant=` | yes | sends them back to their queue (`stagecoach dead retry`) |
 * | `DELETE /ojs/v1/queues/{name}/dead-letters?tenant=` | yes | purges them (`stagecoach dead purge`) |
 * | `GET /ojs/v1/unroutable?queue=&tenant=&limit=` | | what no queue took, without bodies |
 * | `GET /ojs/v1/unroutable/{ref}` | | one of them with its headers and body |
 * | `POST /ojs/v1/unroutable/replay` | yes | sends them on where a queue exists now (`stagecoach unroutable replay`) |
 *
 * Reads need no token, as in the admin API (it listens on 127.0.0.1 unless configured); every
 * change does. The library functions behind them are the command line's, so a retry from the
 * page keeps every rule of `dead retry` (origin routing, tenant checks, error history).
 */
export function dashboardRoutes(ctx: DashboardContext, snapshots: QueueSnapshots = new QueueSnapshots()): DashboardRoute[] {
  // After a change the next matrix reads the broker again, so the page shows its effect at once.
  let changed = false;
  const changing =
    (handle: DashboardRoute['handle']): DashboardRoute['handle'] =>
    async (request) => {
      try {
        return await handle(request);
      } finally {
        changed = true;
      }
    };

  return [
    {
      method: 'GET',
      path: '/ojs/v1/dashboard/matrix',
      mutating: false,
      handle: async ({ query }) => {
        const config = await ctx.configFile.load();
        const fresh = changed;
        changed = false;
        const snapshot = await snapshots.read(config, ctx.api(config), fresh);
        const matrix = buildMatrix(config, ctx.stages, snapshot.reports, snapshot.unroutable, {
          filter: query.get('filter') ?? '',
          problems: flagOf(query, 'problems'),
          sort: sortOf(query),
          offset: integerOf(query, 'offset', 0, 0, 10_000_000),
          limit: integerOf(query, 'limit', DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE),
        });
        // The broker's alarms beside the queues: while one is raised nothing is published anywhere.
        return { status: 200, body: { ...matrix, alarms: snapshot.alarms, limits: limitList(snapshot.limits) } };
      },
    },
    {
      method: 'GET',
      path: '/ojs/v1/queues/{name}/dead-letters',
      mutating: false,
      handle: async ({ params, query }) => {
        const config = await ctx.configFile.load();
        const queue = queueOf(config, params);
        const tenant = tenantOf(query);
        const limit = integerOf(query, 'limit', DEFAULT_LIST, 1, MAX_SCAN);
        const entries = await orQueueMissing(() => listDeadLetters(config, queue, tenant, ctx.log, limit, ctx.payloads));
        return {
          status: 200,
          body: { queue, ...(tenant === undefined ? {} : { tenant }), limit, dead_letters: withPositions(entries).map(deadLetterView) },
        };
      },
    },
    {
      method: 'GET',
      path: '/ojs/v1/queues/{name}/dead-letters/{ref}',
      mutating: false,
      handle: async ({ params, query }) => {
        const config = await ctx.configFile.load();
        const queue = queueOf(config, params);
        const tenant = tenantOf(query);
        const deadQueues = deadQueuesOf(config, queue, tenant);
        if (deadQueues.length !== 1) throw new DashboardRequestError('?tenant=', `queue "${queue}" is tenant-scoped: name the tenant`);
        return {
          status: 200,
          body: await orQueueMissing(() => peekMessage(config, ctx.log, deadQueues[0], params.ref ?? '', ctx.payloads)),
        };
      },
    },
    {
      method: 'POST',
      path: '/ojs/v1/queues/{name}/dead-letters/retry',
      mutating: true,
      handle: changing(async ({ params, query }) => {
        const config = await ctx.configFile.load();
        const queue = queueOf(config, params);
        const tenant = tenantOf(query);
        const result = await orQueueMissing(() => retryDeadLetters(config, queue, tenant, ctx.log));
        ctx.log.info('dead letters retried through the dashboard', { queue, tenant, ...result });
        return { status: 200, body: { queue, ...(tenant === undefined ? {} : { tenant }), ...result } };
      }),
    },
    {
      method: 'DELETE',
      path: '/ojs/v1/queues/{name}/dead-letters',
      mutating: true,
      handle: changing(async ({ params, query }) => {
        const config = await ctx.configFile.load();
        const queue = queueOf(config, params);
        const tenant = tenantOf(query);
        const purged = await orQueueMissing(() => purgeDeadLetters(config, queue, tenant, ctx.log));
        ctx.log.info('dead letters purged through the dashboard', { queue, tenant, purged });
        return { status: 200, body: { queue, ...(tenant === undefined ? {} : { tenant }), purged } };
      }),
    },
    {
      method: 'GET',
      path: '/ojs/v1/unroutable',
      mutating: false,
      handle: async ({ query }) => {
        const config = await ctx.configFile.load();
        const limit = integerOf(query, 'limit', DEFAULT_LIST, 1, MAX_SCAN);
        const queue = query.get('queue') ?? '';
        const tenant = tenantOf(query);
        // Positions count every message of the queue, so they are taken before filtering.
        const entries = (await unroutableOrNone(() => listUnroutable(config, ctx.log, MAX_SCAN))).map(unroutableView);
        const matching = entries.filter(
          (entry) => (queue === '' || entry.queue === queue) && (tenant === undefined || entry.tenant === tenant),
        );
        return {
          status: 200,
          body: { limit, scanned: entries.length, unroutable: matching.slice(0, limit) },
        };
      },
    },
    {
      method: 'GET',
      path: '/ojs/v1/unroutable/{ref}',
      mutating: false,
      handle: async ({ params }: DashboardRequest) => {
        const config = await ctx.configFile.load();
        const unroutable = new BrokerNames(config.prefix).unroutable;
        return { status: 200, body: await orQueueMissing(() => peekMessage(config, ctx.log, unroutable, params.ref ?? '', ctx.payloads)) };
      },
    },
    {
      method: 'POST',
      path: '/ojs/v1/unroutable/replay',
      mutating: true,
      handle: changing(async () => {
        const config = await ctx.configFile.load();
        const result = await orQueueMissing(() => replayUnroutable(config, ctx.log));
        ctx.log.info('unroutable replayed through the dashboard', { ...result });
        return { status: 200, body: result };
      }),
    },
  ];
}

/** The unroutable queue is declared by the first publisher or stage: before that, nothing was ever unroutable. */
async function unroutableOrNone(list: () => Promise<UnroutableEntry[]>): Promise<UnroutableEntry[]> {
  try {
    return await list();
  } catch (err) {
    if (missingQueueOf(err) !== undefined) return [];
    throw err;
  }
}

/** Each entry with its position in its own dead-letter queue (for messages with no id). */
function withPositions(entries: readonly DeadLetterEntry[]): Array<DeadLetterEntry & { position: number }> {
  const counts = new Map<string, number>();
  return entries.map((entry) => {
    const position = counts.get(entry.deadQueue) ?? 0;
    counts.set(entry.deadQueue, position + 1);
    return { ...entry, position };
  });
}

function deadLetterView(entry: DeadLetterEntry & { position: number }): Record<string, unknown> {
  return {
    ref: messageRef(entry.id, entry.position),
    dead_queue: entry.deadQueue,
    id: entry.id ?? null,
    type: entry.type ?? null,
    tenant: entry.tenant ?? null,
    attempt: entry.attempt ?? null,
    error: entry.errorType === undefined ? null : { type: entry.errorType, message: entry.errorMessage ?? '' },
    dead_lettered_at: entry.deadLetteredAt ?? null,
    is_job: entry.isJob,
    payload: entry.payload ?? null,
  };
}

interface UnroutableView {
  ref: string;
  id: string | null;
  type: string | null;
  queue: string;
  tenant: string | null;
  attempt: number | null;
  size: number;
}

function unroutableView(entry: UnroutableEntry, position: number): UnroutableView {
  const attempt = entry.headers[OJS_HEADERS.attempt];
  return {
    ref: messageRef(entry.messageId, position),
    id: entry.messageId ?? null,
    type: entry.type ?? null,
    queue: entry.queue,
    tenant: entry.tenant ?? null,
    attempt: typeof attempt === 'number' ? attempt : null,
    size: Buffer.byteLength(entry.body),
  };
}
