import { FlagChannel } from '../flags/flag-channel.js';
import type { AmqpConnection } from './amqp-connection.js';

/**
 * Whether an exchange exists (a passive declare on a channel of its own).
 * @returns false only for the broker's 404; anything else is thrown.
 * @deprecated for src/runner/stage-group.ts until it asks
 * `BrokerFlags.isSet({ kind: 'tenant-provisioned', tenant })` (src/flags/broker-flags.ts).
 */
export async function exchangeExists(connection: AmqpConnection, exchange: string): Promise<boolean> {
  const probe = new FlagChannel(connection);
  try {
    return await probe.exchangeExists(exchange);
  } finally {
    await probe.close();
  }
}
