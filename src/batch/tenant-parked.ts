import { openConnection } from '../broker/amqp-connection.js';
import { exchangeExists } from '../broker/exchange-exists.js';
import { exclusiveRead, peek } from '../broker/peek.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames, parkKey } from '../topology/names.js';

/** What a tenant has of batch and tenant directives: its pause, and its jobs parked by any pause. */
export interface TenantParked {
  /** Its `tenant pause` marker exists. */
  paused: boolean;
  /** Jobs of it in the parked queue (parked by its own pause or by a paused batch). */
  parked: number;
}

/**
 * Reads, without consuming, how many parked jobs a tenant has (the parked queue's messages whose
 * routing key is the tenant) and whether it is paused. `tenant retire` asks this first: parked
 * jobs live outside the tenant's queues, so removing those would leave them behind for good.
 */
export async function tenantParked(config: CompiledConfig, tenant: string, log: Logger): Promise<TenantParked> {
  const names = new BrokerNames(config.prefix);
  const connection = await openConnection(config, log, 'stagecoach-directive');
  try {
    const paused = await exchangeExists(connection, names.tenantPauseMarker(tenant));
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
    if (total === 0) return { paused, parked: 0 };
    // Never beside another read that holds messages, in this process or another (see exclusiveRead).
    const key = parkKey(tenant);
    const parked = await exclusiveRead(config, log, async () => {
      const reader = await connection.createChannel();
      try {
        return (await peek(reader, names.parked, total)).filter((message) => message.fields.routingKey === key).length;
      } finally {
        await reader.close().catch(() => undefined);
      }
    });
    return { paused, parked };
  } finally {
    await connection.close().catch(() => undefined);
  }
}
