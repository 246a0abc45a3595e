import { randomUUID } from 'node:crypto';
import amqplib, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import type { OjsEvent } from '../../src/events/ojs-event.js';
import { waitFor } from './wait-for.js';

/** One event as the tap received it: the envelope and the AMQP message it came in. */
export interface TappedEvent {
  event: OjsEvent;
  routingKey: string;
  properties: ConsumeMessage['properties'];
}

/** Routing key of the tap's own fence messages (no event type looks like it). */
const FENCE = 'test.fence';

/**
 * What an operator's consumer of `<prefix>.events` sees: an exclusive queue bound with `#`,
 * collecting every event in arrival order. The exchange is declared here too (as every
 * stagecoach process declares it), so the tap can bind before anything was provisioned.
 */
export class EventTap {
  readonly events: TappedEvent[] = [];
  private readonly fences = new Set<string>();

  private constructor(
    private readonly connection: ChannelModel,
    private readonly channel: Channel,
    private readonly exchange: string,
  ) {}

  static async open(url: string, exchange: string): Promise<EventTap> {
    const connection = await amqplib.connect(url);
    connection.on('error', () => undefined);
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await channel.assertExchange(exchange, 'topic', { durable: false });
    const { queue } = await channel.assertQueue('', { exclusive: true, autoDelete: true });
    await channel.bindQueue(queue, exchange, '#');
    const tap = new EventTap(connection, channel, exchange);
    await channel.consume(
      queue,
      (message) => {
        if (message === null) return;
        if (message.fields.routingKey === FENCE) {
          tap.fences.add(message.content.toString());
          return;
        }
        tap.events.push({
          event: JSON.parse(message.content.toString()) as OjsEvent,
          routingKey: message.fields.routingKey,
          properties: message.properties,
        });
      },
      { noAck: true },
    );
    return tap;
  }

  /** The events of `type` received so far that `match` accepts. */
  of(type: string, match: (event: OjsEvent) => boolean = () => true): TappedEvent[] {
    return this.events.filter((tapped) => tapped.event.type === type && match(tapped.event));
  }

  /** Waits for the first event of `type` that `match` accepts. */
  next(type: string, match: (event: OjsEvent) => boolean = () => true, timeoutMs = 15_000): Promise<TappedEvent> {
    return waitFor(`a ${type} event on ${this.exchange}`, () => this.of(type, match)[0], timeoutMs);
  }

  /**
   * Resolves once every event the broker confirmed before this call has arrived: a message of
   * the tap's own, published after them, comes back after them (one queue keeps order). So
   * "no such event" can be asserted without waiting and hoping.
   */
  async fence(): Promise<void> {
    const id = randomUUID();
    const confirm = await this.connection.createConfirmChannel();
    try {
      confirm.publish(this.exchange, FENCE, Buffer.from(id));
      await confirm.waitForConfirms();
    } finally {
      await confirm.close();
    }
    await waitFor('the fence through the events exchange', () => this.fences.has(id));
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined);
  }
}
