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

  /** Consumers of a queue as the broker counts them now, or undefined when the queue is missing. */
  async consumers(queue: string): Promise<number | undefined> {
    return this.withChannel(async (ch) => (await ch.checkQueue(queue)).consumerCount);
  }

  async exists(queue: string): Promise<boolean> {
    return (await this.count(queue)) !== undefined;
  }

  /** Whether an exchange exists (passive declare on a throwaway channel). */
  async exchangeExists(exchange: string): Promise<boolean> {
    const found = await this.withChannel(async (ch) => {
      await ch.checkExchange(exchange);
      return true;
    });
    return found === true;
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

  /** Takes (acknowledges) the next message of a queue, if any. */
  async takeOne(queue: string): Promise<GetMessage | undefined> {
    const message = await this.channel.get(queue, { noAck: true });
    return message === false ? undefined : message;
  }

  /**
   * Takes the next message and rejects it without requeue, as a consumer giving up does: the
   * queue's dead-letter route (if any) takes it. Returns its message id.
   */
  async reject(queue: string): Promise<string | undefined> {
    const message = await this.channel.get(queue, { noAck: false });
    if (message === false) return undefined;
    this.channel.nack(message, false, false);
    return message.properties.messageId as string | undefined;
  }

  /**
   * Takes `count` messages of a queue without acknowledging them, then closes the channel: the
   * broker puts them back flagged `redelivered`, as after the crash of the process holding them.
   */
  async takeAndDrop(queue: string, count: number): Promise<void> {
    const channel = await this.connection.createChannel();
    for (let taken = 0; taken < count;) if ((await channel.get(queue, { noAck: false })) !== false) taken++;
    await channel.close();
  }

  /** Deletes a queue, as an operator would; a missing queue is not an error. */
  async deleteQueue(queue: string): Promise<void> {
    await this.withChannel((ch) => ch.deleteQueue(queue));
  }

  /** Deletes an exchange, as an operator (or a broken deployment) would. */
  async deleteExchange(exchange: string): Promise<void> {
    await this.withChannel((ch) => ch.deleteExchange(exchange));
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
