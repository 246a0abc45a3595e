import { randomBytes } from 'node:crypto';
import amqplib from 'amqplib';
import { compileConfig } from '../config/compile-config.js';
import type { CompiledConfig, RawConfig } from '../config/config.types.js';
import { mergeTopologies, provisionTopology, stageDeclaredTopology } from '../topology/build-topology.js';
import type { Topology } from '../topology/topology.types.js';
import type { StageMetadata } from '../stage/stage.types.js';
import { deleteQueueSettings } from '../plan/queue-settings.js';
import { managementApiOf } from '../security/management-api.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import { possibleStateMarkers } from '../state/queue-state.js';

/**
 * Test preset (after rascal's `withTestConfig`): the configuration with a unique prefix, so
 * that test runs never see each other's queues, and non-durable queues and exchanges.
 * `AMQP_URL` is honoured.
 *
 * @param source where stage module paths resolve from (a file path), as with a config file.
 */
export function withTestConfig(raw: RawConfig, source?: string): CompiledConfig {
  const prefix = `test-${randomBytes(4).toString('hex')}`;
  const url = process.env.AMQP_URL ?? raw.broker?.url;
  return compileConfig({ ...raw, prefix, durable: false, broker: { ...raw.broker, ...(url === undefined ? {} : { url }) } }, source);
}

/**
 * Deletes every exchange and queue of the given topologies (by default: what `provision`
 * would declare for the configured tenants, and what their stages declare themselves), their
 * queue states, and the prefix's queue settings (policies). Missing names are skipped.
 */
export async function teardown(config: CompiledConfig, stages: readonly StageMetadata[] = [], ...extra: Topology[]): Promise<void> {
  const topology = mergeTopologies(provisionTopology(config, stages), stageDeclaredTopology(config, stages), ...extra);
  const connection = await amqplib.connect(config.broker.url);
  try {
    for (const queue of topology.queues) await withChannel(connection, (ch) => ch.deleteQueue(queue.name));
    for (const exchange of topology.exchanges) await withChannel(connection, (ch) => ch.deleteExchange(exchange.name));
    for (const marker of possibleStateMarkers(config.prefix, topology)) await withChannel(connection, (ch) => ch.deleteExchange(marker));
  } finally {
    await connection.close();
  }
  try {
    await deleteQueueSettings(config, managementApiOf(config));
  } catch {
    // No management API: then nothing could have put a policy either.
  }
  await deleteFlowQueues(config);
}

/**
 * The flow limits' token queues (`<prefix>.flow.*`, docs/flow-control.md): named by partition,
 * per tenant and per job key, so only the broker's list knows them all. Without the management
 * API they stay (non-durable under this preset: gone at the broker's next restart).
 */
async function deleteFlowQueues(config: CompiledConfig): Promise<void> {
  let names: string[];
  try {
    const queues = await managementApiOf(config).listQueues(vhostOfAmqpUrl(config.broker.url));
    names = queues.map((queue) => queue.name).filter((name) => name.startsWith(`${config.prefix}.flow.`));
  } catch {
    return;
  }
  if (names.length === 0) return;
  const connection = await amqplib.connect(config.broker.url);
  try {
    for (const name of names) await withChannel(connection, (ch) => ch.deleteQueue(name));
  } finally {
    await connection.close();
  }
}

/**
 * Empties the queues `provision` and the stages declare, without deleting them (missing ones are
 * skipped). Not the tracking stream: a stream cannot be purged (the broker answers with a
 * connection error, NOT_IMPLEMENTED, that would take every channel down), and its records are
 * history, not work: batch ids are what tell runs apart there.
 */
export async function purge(config: CompiledConfig, stages: readonly StageMetadata[] = []): Promise<void> {
  const topology = mergeTopologies(provisionTopology(config, stages), stageDeclaredTopology(config, stages));
  const connection = await amqplib.connect(config.broker.url);
  // A connection error is also the rejection of the call that caused it: not an unhandled event.
  connection.on('error', () => undefined);
  try {
    for (const queue of topology.queues) {
      if (queue.arguments['x-queue-type'] === 'stream') continue;
      await withChannel(connection, (ch) => ch.purgeQueue(queue.name));
    }
  } finally {
    await connection.close();
  }
}

async function withChannel(connection: amqplib.ChannelModel, action: (channel: amqplib.Channel) => Promise<unknown>): Promise<void> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  try {
    await action(channel);
    await channel.close();
  } catch {
    // A missing queue or exchange closes this throwaway channel only.
  }
}
