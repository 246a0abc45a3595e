import type { Channel, GetMessage } from 'amqplib';
import { openConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import { OJS_HEADERS, withoutBrokerHeaders } from '../job/amqp-mapping.js';
import { DELAY_LEVELS, delayRoutingKey } from '../topology/delay-topology.js';
import type { Logger } from '../logging/logger.js';
import { identitiesOf, vhostOfAmqpUrl } from '../security/broker-users.js';
import { exclusiveRead, peek } from '../broker/peek.js';
import { BrokerNames } from '../topology/names.js';
import { managementClientOf } from '../broker-management/management-client.js';
import { RouteCheck } from './route-check.js';

export interface UnroutableEntry {
  messageId: string | undefined;
  type: string | undefined;
  /** Logical queue (the routing key it was published with), or the physical queue the delay ladder was delivering it to. */
  queue: string;
  tenant: string | undefined;
  headers: Record<string, unknown>;
  body: string;
}

export interface ReplayResult {
  /** Republished into a queue (its tenant's or the shared queue, or back on the delay ladder), and confirmed by the broker. */
  replayed: number;
  /** Left where they were, in the unroutable queue: no queue would take them yet (or their publisher may not act for their tenant). */
  kept: number;
}

/** Reads the unroutable queue without consuming it: every message is handed back. */
export async function listUnroutable(config: CompiledConfig, log: Logger, limit = 100): Promise<UnroutableEntry[]> {
  // Never beside another read that holds messages, in this process or another (see exclusiveRead).
  return exclusiveRead(config, log, async () => {
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
  });
}

/**
 * Moves unroutable jobs back to where they were headed, once their tenant or queue exists.
 *
 * Bounded: it reads at most the messages that were in the queue when it started. A job is
 * replayed only when a queue would take it: its tenant's exchange, and a binding there for its
 * logical queue (one a drained queue has not lost), or the shared queue's binding, as the broker's
 * bindings say now (management API, see RouteCheck). Publishing alone cannot tell: the entry
 * exchanges' alternate exchange would take a job no queue wants straight back to the tail of
 * `unroutable`, confirmed. Any other job is handed back untouched, in its place, and counted
 * `kept`. A binding removed between the check and the publish still sends the job back to the
 * tail of `unroutable` (not read again in this run): replay never loops and never loses a job.
 *
 * With `security.tenantUsers` the replay is published as the operator, whom stages trust for
 * every tenant, so the operator vouches only for what the original publisher could: a job whose
 * validated `user_id` may not act for its tenant (a producer that claimed another tenant's
 * header) is kept, never replayed into that tenant.
 */
export async function replayUnroutable(config: CompiledConfig, log: Logger): Promise<ReplayResult> {
  // Never beside another read that holds messages, in this process or another (see exclusiveRead).
  return exclusiveRead(config, log, async () => {
    const names = new BrokerNames(config.prefix);
    const connection = await openConnection(config, log, 'stagecoach-unroutable');
    const result: ReplayResult = { replayed: 0, kept: 0 };
    try {
      const channel = await connection.createChannel();
      const publisher = await ConfirmPublisher.open(connection);
      const exists = new Map<string, boolean>();
      const routes = new RouteCheck(managementClientOf(config), vhostOfAmqpUrl(config.broker.url), names.unroutable);
      const { messageCount } = await channel.checkQueue(names.unroutable);
      for (let i = 0; i < messageCount; i++) {
        const message = await channel.get(names.unroutable, { noAck: false });
        if (message === false) break;
        const entry = describe(config, message);
        const target = targetOf(config, entry, message.fields.routingKey);
        const headers = withoutBrokerHeaders(message.properties.headers);
        if (!target || !(await arrives(connection, routes, target, headers, exists))) {
          result.kept++;
          continue; // stays unacknowledged: handed back, where it was, when the channel closes
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
        await publisher.publish(target.exchange, target.routingKey, message.content, { ...message.properties, headers });
        channel.ack(message);
        result.replayed++;
      }
      await publisher.close();
      await channel.close();
      await keptBack(connection, names.unroutable, result.kept);
      log.info('unroutable replayed', { ...result });
      return result;
    } finally {
      await connection.close().catch(() => undefined);
    }
  });
}

/**
 * The broker requeues what a closed channel held a moment after the close is confirmed: the
 * replay answers once the kept jobs are back, so whoever reads the queue next sees them.
 */
async function keptBack(connection: { createChannel(): Promise<Channel> }, queue: string, kept: number): Promise<void> {
  if (kept === 0) return;
  const channel = await connection.createChannel();
  try {
    const deadline = Date.now() + KEPT_BACK_WITHIN_MS;
    while ((await channel.checkQueue(queue)).messageCount < kept && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await channel.close().catch(() => undefined);
  }
}

const KEPT_BACK_WITHIN_MS = 5000;

function describe(config: CompiledConfig, message: GetMessage): UnroutableEntry {
  const headers = (message.properties.headers ?? {}) as Record<string, unknown>;
  const tenant = headers[config.tenantHeader] ?? headers[OJS_HEADERS.tenant];
  // A job the delay ladder could not deliver shows the physical queue it was bound for.
  const ladder = LADDER_KEY.exec(message.fields.routingKey);
  return {
    messageId: message.properties.messageId as string | undefined,
    type: message.properties.type as string | undefined,
    queue: ladder ? ladder[1] : message.fields.routingKey,
    tenant: typeof tenant === 'string' ? tenant : undefined,
    headers,
    body: message.content.toString('utf8'),
  };
}

interface ReplayTarget {
  exchange: string;
  routingKey: string;
  check: { kind: 'exchange' | 'queue'; name: string };
  /** Back by the delay ladder, to the physical queue it was bound for. */
  ladder?: true;
}

/** A routing key of the delay ladder: the delay's bits, then the physical queue it was bound for. */
const LADDER_KEY = new RegExp(`^(?:[01]\\.){${DELAY_LEVELS}}(.+)$`);

/**
 * Where a replayed job goes, or undefined when nothing could ever take it (no tenant, unknown
 * queue). A job the delay ladder could not deliver (its queue was gone) goes back, by the
 * ladder, to the physical queue it was bound for: it is routed by that name, never by the
 * tenant it claims. One bound for a main queue (a retry parked before `due` queues existed)
 * goes to that queue's `due` companion. Anything else was never in a queue, and goes where
 * its producer sent it.
 */
function targetOf(config: CompiledConfig, entry: UnroutableEntry, routingKey: string): ReplayTarget | undefined {
  const names = new BrokerNames(config.prefix);
  const ladder = LADDER_KEY.exec(routingKey);
  if (ladder) {
    const bound = ladder[1];
    const mainPrefix = `${names.prefix}.queue.`;
    const destination = bound.startsWith(mainPrefix) ? `${names.prefix}.due.${bound.slice(mainPrefix.length)}` : bound;
    return {
      exchange: names.retry,
      routingKey: delayRoutingKey(0, destination),
      check: { kind: 'queue', name: destination },
      ladder: true,
    };
  }
  const scope = config.queues.get(entry.queue)?.scope ?? (config.strict_queues ? undefined : config.defaultQueue.scope);
  if (scope === 'shared')
    return { exchange: names.direct, routingKey: entry.queue, check: { kind: 'queue', name: names.queue(entry.queue) } };
  if (scope === undefined || entry.tenant === undefined) return undefined;
  return { exchange: names.root, routingKey: entry.queue, check: { kind: 'exchange', name: names.tenantExchange(entry.tenant) } };
}

/**
 * Whether the job would arrive in a queue: by the broker's bindings for a tenant-scoped or shared
 * target; for the delay ladder, whether the queue it was bound for exists (the ladder's own
 * bindings are the shared topology's, and its `deliver` step binds every companion queue by name).
 */
async function arrives(
  connection: { createChannel(): Promise<Channel> },
  routes: RouteCheck,
  target: ReplayTarget,
  headers: Record<string, unknown>,
  cache: Map<string, boolean>,
): Promise<boolean> {
  if (!(await destinationExists(connection, target.check, cache))) return false;
  if (target.ladder) return true;
  return routes.arrives(target.exchange, target.routingKey, headers);
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
