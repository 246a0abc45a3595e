import type { Channel, ChannelModel } from 'amqplib';
import type { FlagReader } from './flag-reader.js';

/** AMQP reply codes: no such object; another connection owns the exclusive queue; no permission. */
const NOT_FOUND = 404;
const RESOURCE_LOCKED = 405;
const ACCESS_REFUSED = 403;

/** What one try for an exclusive queue found: it is this connection's now, another connection's, or not ours to declare. */
export type HoldOutcome = 'held' | 'taken' | 'refused';

/**
 * The broker side of flags, by name: passive declares, marker exchanges declared and deleted, an
 * exclusive queue held. BrokerFlags puts typed flags on it; declareTopology asks it about drain
 * flags by name (FlagReader).
 *
 * Reading is a passive declare, which needs no permission: stages, whose users may have neither
 * configure permission nor management access, read flags this way. A missing object is the
 * broker's 404, which closes the channel; so everything runs on one channel of the connection,
 * one operation at a time (two at once would lose each other's channel), and the next operation
 * after a refusal opens another channel. Asking about a present flag thus costs a round trip and
 * no channel.
 */
export class FlagChannel implements FlagReader {
  private channel: Channel | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly connection: ChannelModel) {}

  /**
   * Whether an exchange exists.
   * @returns false only for the broker's 404; anything else (the connection gone, access refused)
   * is thrown, because it says nothing about the exchange.
   */
  exchangeExists(name: string): Promise<boolean> {
    return this.run(
      async (channel) => {
        await channel.checkExchange(name);
        return true;
      },
      (code) => (code === NOT_FOUND ? false : undefined),
    );
  }

  /** Whether a queue exists; one that another connection owns exclusively does (the broker answers "locked"). */
  queueExists(name: string): Promise<boolean> {
    return this.run(
      async (channel) => {
        await channel.checkQueue(name);
        return true;
      },
      (code) => (code === NOT_FOUND ? false : code === RESOURCE_LOCKED ? true : undefined),
    );
  }

  async present(names: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const name of names) if (await this.exchangeExists(name)) found.add(name);
    return found;
  }

  /** Declares a marker: a fanout exchange nothing is bound to (declaring it again is harmless). */
  declareMarker(name: string, durable: boolean): Promise<void> {
    return this.run(async (channel) => {
      await channel.assertExchange(name, 'fanout', { durable });
    });
  }

  /** Deletes a marker (absent already is fine). */
  deleteMarker(name: string): Promise<void> {
    return this.run(async (channel) => {
      await channel.deleteExchange(name);
    });
  }

  /**
   * Tries once to own an exclusive queue on this connection. The broker lets one connection at a
   * time own it and deletes it when that connection closes: closing is the release, on every
   * path, a crash included.
   */
  holdExclusive(name: string): Promise<HoldOutcome> {
    return this.run(
      async (channel): Promise<HoldOutcome> => {
        await channel.assertQueue(name, { exclusive: true, durable: false, autoDelete: false });
        return 'held';
      },
      (code) => (code === RESOURCE_LOCKED ? 'taken' : code === ACCESS_REFUSED ? 'refused' : undefined),
    );
  }

  async close(): Promise<void> {
    const channel = this.channel;
    this.channel = undefined;
    await channel?.close().catch(() => undefined);
  }

  /**
   * Runs `op` on the channel once every operation asked before it is done. A refusal closes the
   * channel: it is dropped, and `answer` may turn the refusal's reply code into a result (when it
   * gives undefined, the error is thrown).
   */
  private run<T>(op: (channel: Channel) => Promise<T>, answer: (code: unknown) => T | undefined = () => undefined): Promise<T> {
    const attempt = async (): Promise<T> => {
      const channel = this.channel ?? (await this.open());
      try {
        return await op(channel);
      } catch (err) {
        if (this.channel === channel) this.channel = undefined;
        const result = answer((err as { code?: unknown }).code);
        if (result === undefined) throw err;
        return result;
      }
    };
    const result = this.queue.then(attempt, attempt);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async open(): Promise<Channel> {
    const channel = await this.connection.createChannel();
    // A refusal closes the channel with an 'error' event: no listener would crash the process.
    channel.on('error', () => undefined);
    this.channel = channel;
    return channel;
  }
}
