import type { Channel } from 'amqplib';
import type { AmqpConnection } from './amqp-connection.js';

/**
 * Asks whether exchanges exist with passive declares (no permission needed), many in a row on
 * one channel. The broker's 404 for a missing exchange closes that channel; the next question
 * opens another. For one question, `exchangeExists` does the same on a throwaway channel.
 */
export class ExchangeProbe {
  private channel: Channel | undefined;

  constructor(private readonly connection: AmqpConnection) {}

  /**
   * @returns false only for the broker's 404; anything else (the connection gone) is thrown,
   * because it says nothing about the exchange.
   */
  async exists(exchange: string): Promise<boolean> {
    if (this.channel === undefined) {
      const channel = await this.connection.createChannel();
      // The 404 closes the channel with an 'error' event: no listener would crash the process.
      channel.on('error', () => undefined);
      this.channel = channel;
    }
    try {
      await this.channel.checkExchange(exchange);
      return true;
    } catch (err) {
      this.channel = undefined;
      if ((err as { code?: unknown }).code === 404) return false;
      throw err;
    }
  }

  async close(): Promise<void> {
    const channel = this.channel;
    this.channel = undefined;
    await channel?.close().catch(() => undefined);
  }
}
