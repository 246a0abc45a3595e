import type { CompiledConfig } from '../config/config.types.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import { ManagementClient, managementClientOf } from '../broker-management/management-client.js';
import { escape } from '../topology/queue-policies.js';
import { buildQueueReports, type QueueReport } from './queue-report.js';

export interface InspectOptions {
  /** Only this tenant's queues (shared queues belong to no tenant and are left out). */
  tenant?: string;
  /** Only this logical queue's physical queues. */
  queue?: string;
  /** The management API client (default: one for `config.broker.management`). */
  api?: ManagementClient;
}

/**
 * Every physical work queue under the prefix, with its state, counts, rates, bound and
 * companions (see {@link QueueReport}), read through the management API in two calls: the
 * queues with their statistics, and the exchanges (where the state markers are).
 */
export async function inspectQueues(config: CompiledConfig, options: InspectOptions = {}): Promise<QueueReport[]> {
  const api = options.api ?? managementClientOf(config);
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const named = options.tenant === undefined ? undefined : tenantObjects(config.prefix, options.tenant);
  const [queues, exchanges] = await Promise.all([
    api.queueStatistics(vhost, named?.queues),
    named === undefined
      ? api.listExchanges(vhost).then((list) => list.map((exchange) => exchange.name))
      : api.listExchangeNames(vhost, named.exchanges),
  ]);
  const ours = (name: string): boolean => name.startsWith(`${config.prefix}.`);
  return buildQueueReports(
    config,
    queues.filter((queue) => ours(queue.name)),
    exchanges.filter(ours),
    {
      ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
      ...(options.queue === undefined ? {} : { queue: options.queue }),
    },
  );
}

/**
 * What one tenant's report reads, as regular expressions for the broker to filter by (queue
 * names, tenants and variants have no dots: src/flags/flag.ts): its work queues and their `due`,
 * `suspect` and `dead` companions (`<prefix>.<kind>.<queue>.<tenant>[.<variant>]`), the flow
 * limits' partitions (`<prefix>.flow.*`, few), and its state markers. A superset is harmless:
 * buildQueueReports keeps the tenant's own.
 */
function tenantObjects(prefix: string, tenant: string): { queues: string; exchanges: string } {
  const p = escape(prefix);
  const t = escape(tenant);
  return {
    queues: `^${p}\\.([^.]+\\.[^.]+\\.${t}(\\.[^.]+)?|flow\\..*)$`,
    exchanges: `^${p}\\.state\\.(paused|draining)\\.[^.]+\\.${t}(\\.[^.]+)?$`,
  };
}
