import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import type { ControlMessage } from './control-protocol.js';
import { coreTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';

/**
 * Sends a control message to every running stage (fanout `<prefix>.control`), once connected.
 * Worker states (`quiet`, `terminate`) live in the processes that get it. Queue states live on
 * the broker (src/queue-state/set-queue-state.ts writes them, then calls `publishControl` so that
 * running stages read them again at once).
 */
export async function sendControl(config: CompiledConfig, message: ControlMessage, log: Logger): Promise<void> {
  const connection = await openConnection(config, log, 'stagecoach-control');
  try {
    await declareTopology(connection, coreTopology(config), log);
    await publishControl(connection, config, message);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** Publishes `message` on the control exchange, confirmed, on an open connection. */
export async function publishControl(connection: AmqpConnection, config: CompiledConfig, message: ControlMessage): Promise<void> {
  const publisher = await ConfirmPublisher.open(connection);
  try {
    await publisher.publish(new BrokerNames(config.prefix).control, '', Buffer.from(JSON.stringify(message)), {
      contentType: 'application/json',
    });
  } finally {
    await publisher.close();
  }
}
