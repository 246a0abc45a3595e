import { openConnection, type AmqpConnection } from '../../broker/amqp-connection.js';
import type { CompiledConfig } from '../../config/config.types.js';
import { eventMatches, type EventFilter } from '../../events/event-filter.js';
import type { OjsEvent } from '../../events/ojs-event.js';
import type { Logger } from '../../logging/logger.js';
import { BrokerNames } from '../../topology/names.js';

/** Most events kept: about 0.5 KB each. */
export const EVENT_LOG_SIZE = 10_000;

/** What `GET /ojs/v1/events` filters by (spec/ojs-events.md 6.4). */
export interface EventQuery extends EventFilter {
  /** The id of the last event seen: only later ones. */
  after?: string;
  limit: number;
}

/**
 * The OJS events of the prefix as this server has seen them since it started: a server-named,
 * exclusive queue bound to `<prefix>.events` with `#` (every event any process publishes: stages,
 * the binding's pushes, `apply`, the tracker), newest EVENT_LOG_SIZE kept, for the polling endpoint
 * `GET /ojs/v1/events`. Events are at most once (docs/broker.md "Events"): what was published
 * while this server was down, or before it first listened, is not here.
 */
export class EventLog {
  private readonly events: OjsEvent[] = [];
  private readonly listeners = new Set<(event: OjsEvent) => void>();
  private started: Promise<AmqpConnection> | undefined;

  constructor(
    private readonly loadConfig: () => Promise<CompiledConfig>,
    private readonly log: Logger,
    private readonly size = EVENT_LOG_SIZE,
  ) {}

  /** Starts listening, once (again after its connection closed). */
  listen(): Promise<void> {
    this.started ??= this.open();
    this.started.catch(() => (this.started = undefined));
    return this.started.then(() => undefined);
  }

  /** Told of every event as it arrives (webhook deliveries); returns the way to stop. */
  onEvent(listener: (event: OjsEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The events matching `query`, oldest first, at most `limit`; `has_more` when more match after them. */
  read(query: EventQuery): { events: OjsEvent[]; has_more: boolean } {
    const matching = this.events.filter((event) => (query.after === undefined || event.id > query.after) && eventMatches(event, query));
    return { events: matching.slice(0, query.limit), has_more: matching.length > query.limit };
  }

  clear(): void {
    this.events.length = 0;
  }

  async close(): Promise<void> {
    const connection = await this.started?.catch(() => undefined);
    this.started = undefined;
    await connection?.close().catch(() => undefined);
  }

  private async open(): Promise<AmqpConnection> {
    const config = await this.loadConfig();
    const connection = await openConnection(config, this.log, 'stagecoach-http-events');
    connection.on('close', () => {
      this.log.warn('the HTTP binding stopped reading events: its connection closed; the next request listens again');
      this.started = undefined;
    });
    const channel = await connection.createChannel();
    const { queue } = await channel.assertQueue('', { exclusive: true, autoDelete: true, durable: false });
    // Declared as the topology declares it: a server asked for events before anything published
    // one (or provisioned) listens all the same, rather than failing the bind.
    const exchange = new BrokerNames(config.prefix).events;
    await channel.assertExchange(exchange, 'topic', { durable: config.durable });
    await channel.bindQueue(queue, exchange, '#');
    await channel.consume(
      queue,
      (message) => {
        if (message === null) return;
        try {
          this.add(JSON.parse(message.content.toString('utf8')) as OjsEvent);
        } catch {
          // Not an event (the exchange is the prefix's; anything may publish to it): not listed.
        }
      },
      { noAck: true },
    );
    return connection;
  }

  private add(event: OjsEvent): void {
    if (typeof event?.id !== 'string' || typeof event.type !== 'string') return;
    // Kept in id order (UUIDv7: creation time) so `after` pages through them; arrivals are nearly sorted.
    let at = this.events.length;
    while (at > 0 && (this.events[at - 1] as OjsEvent).id > event.id) at--;
    this.events.splice(at, 0, event);
    if (this.events.length > this.size) this.events.shift();
    for (const listener of this.listeners) listener(event);
  }
}
