import amqplib, { type ChannelModel } from 'amqplib';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import { userOfAmqpUrl } from '../security/broker-users.js';
import { nodeLabel, nodeOrder, rememberNode } from './broker-nodes.js';
import { coalesceWrites, type WriteFlush } from './coalesced-writes.js';

export type AmqpConnection = ChannelModel;

/** How long one node may take to accept a connection (TCP and AMQP handshake). */
export const CONNECT_TIMEOUT_MS = 15_000;

/** The `user_id` stamped on everything published on a connection (see `publisherUserId`). */
const publisherUserIds = new WeakMap<AmqpConnection, string>();

/**
 * Opens one AMQP connection with the configured heartbeat; its channels are the caller's. On a
 * cluster (`broker.urls`) it tries every node once, from `firstNode` on, and takes the first
 * that answers (`nodeOf()` tells which); it fails only when none does. `flush`: when the frames
 * written in one turn leave (coalesced-writes.ts).
 */
export async function openConnection(
  config: CompiledConfig,
  log: Logger,
  name = 'stagecoach',
  firstNode = 0,
  flush: WriteFlush = 'tick',
): Promise<AmqpConnection> {
  const urls = config.broker.urls;
  const failures: string[] = [];
  let connection: AmqpConnection | undefined;
  for (const index of nodeOrder(urls.length, firstNode)) {
    const url = urls[index];
    try {
      connection = await amqplib.connect(withHeartbeat(url, config.broker.heartbeat), {
        // Operators (and tests) find a pipeline's connections by this name in the management UI.
        clientProperties: { connection_name: `${name} [${config.prefix}]` },
        // A node that vanished (host gone, network cut) answers nothing: without a bound the
        // attempt would hang for the system's TCP timeout instead of moving on to the next node.
        timeout: CONNECT_TIMEOUT_MS,
        // TCP_NODELAY, as the broker sets on its side and most AMQP clients do (amqplib does
        // not): with Nagle's algorithm a message of a few KiB or more (a group of tracking
        // reports, a large job) waits for the broker's delayed ACK, up to 40 ms, when nothing
        // else is being sent (docs/performance.md, "Batch tracking").
        noDelay: true,
      });
      rememberNode(connection, { index, label: nodeLabel(url) });
      break;
    } catch (err) {
      failures.push(urls.length === 1 ? (err as Error).message : `${nodeLabel(url)}: ${(err as Error).message}`);
      if (failures.length < urls.length)
        log.debug('broker node does not answer; trying the next', { node: nodeLabel(url), err: (err as Error).message });
      if (failures.length === urls.length) {
        const where = urls.length === 1 ? redact(url) : `any of ${urls.length} nodes`;
        throw new StagecoachError('CONNECTION_FAILED', `cannot connect to ${where}: ${failures.join('; ')}`, { cause: err });
      }
    }
  }
  if (connection === undefined) throw new StagecoachError('CONNECTION_FAILED', 'no broker URL configured');
  coalesceWrites(connection, flush);
  // An 'error' event without a listener would crash the process; 'close' follows it anyway.
  connection.on('error', (err: Error) => log.error('broker connection error', { err: err.message }));
  if (config.security.tenantUsers) publisherUserIds.set(connection, userOfAmqpUrl(config.broker.url));
  return connection;
}

/**
 * With `security.tenantUsers`, the user the connection logged in as: every publisher on it
 * stamps that as the AMQP `user_id`, which the broker validates (it refuses any other), so a
 * stage knows who published each job. Republished deliveries (hand-backs, replays) get the
 * republisher's, never a copied one the broker would refuse. Undefined otherwise: nothing is
 * stamped and properties pass as given.
 */
export function publisherUserId(connection: AmqpConnection): string | undefined {
  return publisherUserIds.get(connection);
}

/**
 * amqplib reads the heartbeat from the URL only (a socket option is ignored and the broker's
 * default applies), so it goes there unless the URL already sets one.
 */
export function withHeartbeat(url: string, seconds: number): string {
  const parsed = new URL(url);
  if (!parsed.searchParams.has('heartbeat')) parsed.searchParams.set('heartbeat', String(seconds));
  return parsed.toString();
}

/** The URL without its password, for log lines and messages. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
}
