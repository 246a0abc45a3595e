import { openConnection } from '../broker/amqp-connection.js';
import { exclusiveRead, peek } from '../broker/peek.js';
import type { CompiledConfig } from '../config/config.types.js';
import { BrokerFlags } from '../flags/broker-flags.js';
import { OJS_HEADERS } from '../job/amqp-mapping.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';

/** What removal asks of a parked message: whose it is, and where `resume` would send it. */
export interface ParkedAddress {
  /** Its routing key at the park exchange: its tenant, `_` for none. */
  key: string;
  /** Its `x-ojs-parked-return`: the `due` or `suspect` queue it goes back to. */
  returnQueue: string | undefined;
}

/**
 * How many parked jobs `pick` chooses, read without consuming. Parked jobs (docs/batches.md) wait
 * outside the queues they came from, so `tenant retire` and `queue delete` ask first: removing
 * those queues would leave such jobs behind for good.
 */
export async function countParked(config: CompiledConfig, log: Logger, pick: (parked: ParkedAddress) => boolean): Promise<number> {
  const names = new BrokerNames(config.prefix);
  const connection = await openConnection(config, log, 'stagecoach-directive');
  try {
    const channel = await connection.createChannel();
    // A broker older than parking has no parked queue: its 404 closes the channel, nothing is parked.
    channel.on('error', () => undefined);
    const total = await channel.checkQueue(names.parked).then(
      ({ messageCount }) => messageCount,
      (err: unknown) => {
        if ((err as { code?: unknown }).code === 404) return 0;
        throw err;
      },
    );
    if (total === 0) return 0;
    // Never beside another read that holds messages, in this process or another (see exclusiveRead).
    return await exclusiveRead(config, log, async () => {
      const messages = await peek(channel, names.parked, total);
      return messages.filter((message) => {
        const back: unknown = message.properties.headers?.[OJS_HEADERS.parkedReturn];
        return pick({ key: message.fields.routingKey, returnQueue: typeof back === 'string' ? back : undefined });
      }).length;
    });
  } finally {
    // Closing hands every message read back, in order.
    await connection.close().catch(() => undefined);
  }
}

/** Whether `tenant pause <tenant>` is in force (its `tenant-paused` flag is set). */
export async function isTenantPaused(config: CompiledConfig, tenant: string, log: Logger): Promise<boolean> {
  const connection = await openConnection(config, log, 'stagecoach-directive');
  try {
    return await new BrokerFlags(connection, config).isSet({ kind: 'tenant-paused', tenant });
  } finally {
    await connection.close().catch(() => undefined);
  }
}
