import type { CompiledConfig } from '../config/config.types.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import { ManagementApi, managementApiOf } from '../security/management-api.js';
import { buildQueueReports, type QueueReport } from './queue-report.js';

export interface InspectOptions {
  /** Only this tenant's queues (shared queues belong to no tenant and are left out). */
  tenant?: string;
  /** Only this logical queue's physical queues. */
  queue?: string;
  /** The management API client (default: one for `config.broker.management`). */
  api?: ManagementApi;
}

/**
 * Every physical work queue under the prefix, with its state, counts, rates, bound and
 * companions (see {@link QueueReport}), read through the management API in two calls: the
 * queues with their statistics, and the exchanges (where the state markers are).
 */
export async function inspectQueues(config: CompiledConfig, options: InspectOptions = {}): Promise<QueueReport[]> {
  const api = options.api ?? managementApiOf(config);
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const [queues, exchanges] = await Promise.all([api.queueStatistics(vhost), api.listExchanges(vhost)]);
  const ours = (name: string): boolean => name.startsWith(`${config.prefix}.`);
  return buildQueueReports(
    config,
    queues.filter((queue) => ours(queue.name)),
    exchanges.map((exchange) => exchange.name).filter(ours),
    {
      ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
      ...(options.queue === undefined ? {} : { queue: options.queue }),
    },
  );
}
