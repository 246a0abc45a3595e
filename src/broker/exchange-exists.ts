import type { AmqpConnection } from './amqp-connection.js';

/**
 * Whether an exchange exists: a passive declare on a throwaway channel of `connection` (a missing
 * exchange closes that channel, nothing else).
 * @returns false only for the broker's 404; anything else (the connection gone, access refused)
 * is thrown, because it says nothing about the exchange.
 */
export async function exchangeExists(connection: AmqpConnection, exchange: string): Promise<boolean> {
  const channel = await connection.createChannel();
  // The broker's 404 closes the channel with an 'error' event: no listener would crash the process.
  channel.on('error', () => undefined);
  try {
    await channel.checkExchange(exchange);
  } catch (err) {
    if ((err as { code?: unknown }).code === 404) return false;
    throw err;
  }
  await channel.close().catch(() => undefined);
  return true;
}
