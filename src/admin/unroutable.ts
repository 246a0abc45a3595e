import type { Channel, GetMessage } from 'amqplib';
import { openConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import { OJS_HEADERS } from '../job/amqp-mapping.js';
import type { Logger } from '../logging/logger.js';
import { identitiesOf } from '../security/broker-users.js';
import { peek } from './peek.js';
import { BrokerNames } from '../topology/names.js';

export interface UnroutableEntry {
  messageId: string | undefined;
  type: string | undefined;
  /** Logical queue: the routing key it was published with. */
  queue: string;
  tenant: string | undefined;
  headers: Record<string, unknown>;
  body: string;
}

export interface ReplayResult {
  /** Republished and confirmed by the broker (a queue took it, or it is back in unroutable). */
  replayed: number;
  /** Left where they were: their tenant or shared queue still does not exist. */
  kept: number;
}

/** Reads the unroutable queue without consuming it: every message is handed back. */
export async function listUnroutable(config: CompiledConfig, log: Logger, limit = 100): Promise<UnroutableEntry[]> {
  const names = new BrokerNames(config.prefix);
  const connection = await openConnection(config, log, 'stagecoach-unroutable');
  try {
    const channel = await connection.createChannel();
    const entries = (await peek(channel, names.unroutable, limit)).map((message) => describe(config, message));
    await channel.close();
    return entries;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/**
 * Moves unroutable jobs back to where they were headed, once their tenant or queue exists.
 *
 * Bounded: it reads at most the messages that were in the queue when it started. A job whose
 * tenant exchange (or shared queue) is still missing is handed back untouched; a job sent back
 * that still finds no queue returns to the tail of `unroutable` by the alternate exchange and
 * is not read again in this run. So replay never loops.
 *
 * With `security.tenantUsers` the replay is published as the operator, whom stages trust for
 * every tenant, so the operator vouches only for what the original publisher could: a job whose
 * validated `user_id` may not act for its tenant (a producer that claimed another tenant's
 * header) is kept, never replayed into that tenant.
 */
export async function replayUnroutable(config: CompiledConfig, log: Logger): Promise<ReplayResult> {
  const names = new BrokerNames(config.prefix);
  const connection = await openConnection(config, log, 'stagecoach-unroutable');
  const result: ReplayResult = { replayed: 0, kept: 0 };
  try {
    const channel = await connection.createChannel();
    const publisher = await ConfirmPublisher.open(connection);
    const exists = new Map<string, boolean>();
    const { messageCount } = await channel.checkQueue(names.unroutable);
    for (let i = 0; i < messageCount; i++) {
      const message = await channel.get(names.unroutable, { noAck: false });
      if (message === false) break;
      const entry = describe(config, message);
      const target = targetOf(config, entry);
      if (!target || !(await destinationExists(connection, target.check, exists))) {
        result.kept++;
        continue; // stays unacknowledged: handed back when the channel closes
      }
      if (config.security.tenantUsers && !identitiesOf(config).mayActFor(entry.tenant, message.properties.userId)) {
        log.warn('unroutable job kept: its publisher may not act for its tenant', {
          job_id: entry.messageId,
          tenant: entry.tenant,
          publisher: message.properties.userId as unknown,
        });
        result.kept++;
        continue;
      }
      await publisher.publish(target.exchange, entry.queue, message.content, {
        ...message.properties,
        headers: message.properties.headers ?? {},
      });
      channel.ack(message);
      result.replayed++;
    }
    await publisher.close();
    await channel.close();
    log.info('unroutable replayed', { ...result });
    return result;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

function describe(config: CompiledConfig, message: GetMessage): UnroutableEntry {
  const headers = (message.properties.headers ?? {}) as Record<string, unknown>;
  const tenant = headers[config.tenantHeader] ?? headers[OJS_HEADERS.tenant];
  return {
    messageId: message.properties.messageId as string | undefined,
    type: message.properties.type as string | undefined,
    queue: message.fields.routingKey,
    tenant: typeof tenant === 'string' ? tenant : undefined,
    headers,
    body: message.content.toString('utf8'),
  };
}

interface ReplayTarget {
  exchange: string;
  check: { kind: 'exchange' | 'queue'; name: string };
}

/** Where a replayed job goes, or undefined when nothing could ever take it (no tenant, unknown queue). */
function targetOf(config: CompiledConfig, entry: UnroutableEntry): ReplayTarget | undefined {
  const names = new BrokerNames(config.prefix);
  const scope = config.queues.get(entry.queue)?.scope ?? (config.strict_queues ? undefined : config.defaultQueue.scope);
  if (scope === 'shared') return { exchange: names.direct, check: { kind: 'queue', name: names.queue(entry.queue) } };
  if (scope === undefined || entry.tenant === undefined) return undefined;
  return { exchange: names.root, check: { kind: 'exchange', name: names.tenantExchange(entry.tenant) } };
}

/** Passive declare on a throwaway channel: a missing name closes that channel, nothing else. */
async function destinationExists(
  connection: { createChannel(): Promise<Channel> },
  check: ReplayTarget['check'],
  cache: Map<string, boolean>,
): Promise<boolean> {
  const key = `${check.kind}:${check.name}`;
  const known = cache.get(key);
  if (known !== undefined) return known;
  const probe = await connection.createChannel();
  probe.on('error', () => undefined);
  let found = true;
  try {
    if (check.kind === 'queue') await probe.checkQueue(check.name);
    else await probe.checkExchange(check.name);
    await probe.close();
  } catch {
    found = false;
  }
  cache.set(key, found);
  return found;
}
