import amqplib, { type ChannelModel } from 'amqplib';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import { userOfAmqpUrl } from '../security/broker-users.js';

export type AmqpConnection = ChannelModel;

/** The `user_id` stamped on everything published on a connection (see `publisherUserId`). */
const publisherUserIds = new WeakMap<AmqpConnection, string>();

/** Opens one AMQP connection with the configured heartbeat; its channels are the caller's. */
export async function openConnection(config: CompiledConfig, log: Logger, name = 'stagecoach'): Promise<AmqpConnection> {
  let connection: AmqpConnection;
  try {
    connection = await amqplib.connect(withHeartbeat(config.broker.url, config.broker.heartbeat), {
      // Operators (and tests) find a pipeline's connections by this name in the management UI.
      clientProperties: { connection_name: `${name} [${config.prefix}]` },
    });
  } catch (err) {
    throw new StagecoachError('CONNECTION_FAILED', `cannot connect to ${redact(config.broker.url)}: ${(err as Error).message}`, {
      cause: err,
    });
  }
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
