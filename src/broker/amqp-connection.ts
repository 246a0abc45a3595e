import amqplib, { type ChannelModel } from 'amqplib';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';

export type AmqpConnection = ChannelModel;

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
  return connection;
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
