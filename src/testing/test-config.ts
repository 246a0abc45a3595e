import { randomBytes } from 'node:crypto';
import amqplib from 'amqplib';
import { compileConfig } from '../config/compile-config.js';
import type { CompiledConfig, RawConfig } from '../config/config.types.js';
import { mergeTopologies, provisionTopology, stageDeclaredTopology } from '../topology/build-topology.js';
import type { Topology } from '../topology/topology.types.js';
import type { StageMetadata } from '../stage/stage.types.js';
import { deleteQueueSettings } from '../plan/queue-settings.js';
import { managementClientOf } from '../broker-management/management-client.js';
import { possibleStateMarkers } from '../queue-state/queue-state.js';
import { deletePrefix } from './delete-prefix.js';

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
 * queue states, and the prefix's queue settings (policies). Missing names are skipped. Then,
 * where the management API answers, whatever else the run left under its prefix (`deletePrefix`).
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
    await deleteQueueSettings(config, managementClientOf(config));
  } catch {
    // No management API: then nothing could have put a policy either.
  }
  // Then what no topology of the configuration names, because the run made it up as it went: the
  // flow limits' token queues (per partition), the `suspect` queues of tenants added while running
  // (declared on first use), the batch and tenant directive flags (per batch). The prefix is the
  // run's own, so all of it is the run's. Without the management API they stay (non-durable under
  // this preset: gone at the broker's next restart).
  const managementUrl = config.broker.managementUrls[0];
  if (managementUrl !== undefined) await deletePrefix(config.broker.url, managementUrl, config.prefix).catch(() => undefined);
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
