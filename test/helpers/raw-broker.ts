import amqplib, { type Channel, type ChannelModel, type ConfirmChannel, type GetMessage, type Options } from 'amqplib';

export const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672/';

/**
 * A plain amqplib client, independent of stagecoach: it plays the "producer in another
 * language" and inspects queues the way an operator would.
 */
export class RawBroker {
  private constructor(
    private readonly connection: ChannelModel,
    private readonly channel: ConfirmChannel,
  ) {}

  static async connect(url = AMQP_URL): Promise<RawBroker> {
    const connection = await amqplib.connect(url);
    // A broker that closes the connection (restart, forced close) must fail the next call, not
    // crash the test process with an unhandled 'error' event.
    connection.on('error', () => undefined);
    const channel = await connection.createConfirmChannel();
    channel.on('error', () => undefined);
    return new RawBroker(connection, channel);
  }

  /** Publishes and waits for the broker's confirm. */
  async publish(exchange: string, routingKey: string, body: string | Buffer, options: Options.Publish = {}): Promise<void> {
    this.channel.publish(exchange, routingKey, Buffer.isBuffer(body) ? body : Buffer.from(body), options);
    await this.channel.waitForConfirms();
  }

  /** Messages in a queue right now (passive declare), or undefined when the queue is missing. */
  async count(queue: string): Promise<number | undefined> {
    return this.withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount);
  }

  async exists(queue: string): Promise<boolean> {
    return (await this.count(queue)) !== undefined;
  }

  /** Takes (acknowledges) every message now in the queue. */
  async drain(queue: string): Promise<GetMessage[]> {
    const taken: GetMessage[] = [];
    for (;;) {
      const message = await this.channel.get(queue, { noAck: true });
      if (message === false) return taken;
      taken.push(message);
    }
  }

  /** Counts of several queues at once; missing queues count as undefined. */
  async counts(queues: readonly string[]): Promise<Record<string, number | undefined>> {
    const result: Record<string, number | undefined> = {};
    for (const queue of queues) result[queue] = await this.count(queue);
    return result;
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined);
  }

  private async withChannel<T>(action: (channel: Channel) => Promise<T>): Promise<T | undefined> {
    const channel = await this.connection.createChannel();
    channel.on('error', () => undefined);
    try {
      const result = await action(channel);
      await channel.close();
      return result;
    } catch {
      return undefined;
    }
  }
}
