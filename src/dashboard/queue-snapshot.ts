import type { CompiledConfig } from '../config/config.types.js';
import { readBrokerAlarms, type BrokerAlarm } from '../inspect/broker-alarms.js';
import { buildLimitReports, type LimitReport } from '../inspect/limit-report.js';
import { buildQueueReports, type QueueReport } from '../inspect/queue-report.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import type { ManagementClient } from '../broker-management/management-client.js';
import { BrokerNames } from '../topology/names.js';

/** Every work queue under the prefix, and the unroutable depth, as the management plugin last sampled them. */
export interface QueueSnapshot {
  reports: QueueReport[];
  unroutable: number | null;
  /** Resource alarms raised on the broker's nodes (publishing blocked); null when the API did not say. */
  alarms: BrokerAlarm[] | null;
  /** Every flow-limit partition under the prefix, from the same statistics (`stagecoach limits`). */
  limits: LimitReport[];
  /** When the management API answered. */
  takenAt: number;
}

/**
 * Shares one reading of the broker between the dashboards polling it. At 1,000 tenants a
 * reading lists some 20,000 queues through the management API; every open page asks every 2 s,
 * and the plugin itself only samples every 5 s. So a reading younger than `maxAgeMs` is served
 * again, and readers arriving while one is under way wait for it instead of starting another.
 * A failed reading is not kept: the next request tries again.
 */
export class QueueSnapshots {
  private readonly cache = new Map<string, { takenAt: number; reading: Promise<QueueSnapshot> }>();

  constructor(
    private readonly maxAgeMs = 1000,
    private readonly clock: () => number = Date.now,
  ) {}

  /** A reading for `config`, fresh or at most `maxAgeMs` old; `fresh` forces a new one (after an action). */
  read(config: CompiledConfig, api: ManagementClient, fresh = false): Promise<QueueSnapshot> {
    const key = `${config.broker.management}\u0000${config.broker.url}\u0000${config.prefix}`;
    const cached = this.cache.get(key);
    if (!fresh && cached !== undefined && this.clock() - cached.takenAt < this.maxAgeMs) return cached.reading;
    const reading = take(config, api, this.clock);
    const entry = { takenAt: this.clock(), reading };
    this.cache.set(key, entry);
    reading.catch(() => {
      if (this.cache.get(key) === entry) this.cache.delete(key);
    });
    return reading;
  }
}

async function take(config: CompiledConfig, api: ManagementClient, clock: () => number): Promise<QueueSnapshot> {
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const [queues, exchanges, alarms] = await Promise.all([api.queueStatistics(vhost), api.listExchanges(vhost), readBrokerAlarms(api)]);
  const ours = (name: string): boolean => name.startsWith(`${config.prefix}.`);
  const oursStats = queues.filter((queue) => ours(queue.name));
  const unroutableName = new BrokerNames(config.prefix).unroutable;
  const unroutable = queues.find((queue) => queue.name === unroutableName);
  return {
    reports: buildQueueReports(config, oursStats, exchanges.map((exchange) => exchange.name).filter(ours)),
    unroutable: unroutable?.messages_ready === undefined ? null : unroutable.messages_ready + (unroutable.messages_unacknowledged ?? 0),
    alarms,
    limits: buildLimitReports(config, oursStats),
    takenAt: clock(),
  };
}
