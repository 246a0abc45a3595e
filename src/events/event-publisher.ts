import type { AdminEvent, AdminEventSink } from './admin-events.js';
import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';
import { createEvent, EVENT_CONTENT_TYPE, type EventType, type OjsEvent } from './ojs-event.js';

export interface EventPublisherOptions {
  /** The `source` of every event: `stagecoach/<command>` or `stagecoach/<stage names>`. */
  source: string;
  log: Logger;
  /**
   * The connection to publish on, read at every event: a stage group's or a `Publisher`'s, which
   * its owner opens, heals and closes. Without it the publisher opens a connection of its own at
   * the first event (a command that emits nothing never connects) and closes it in `close()`.
   */
  connection?: () => AmqpConnection | undefined;
}

/**
 * Publishes OJS events on `<prefix>.events` (a topic exchange, routing key = event type), with
 * publisher confirms, on a channel of its own.
 *
 * Events are best-effort information, never part of the operation they report: `publish()`
 * never rejects. A failure (no connection, a channel closed under it, the exchange missing) is
 * logged as a warning and the event is lost; the next event opens a fresh channel. Consumers
 * must therefore not count on every event arriving, and may see one twice only if they bind
 * twice.
 */
export class EventPublisher {
  private readonly exchange: string;
  /** The channel and the connection it was opened on, while both last. */
  private current: { connection: AmqpConnection; publisher: Promise<ConfirmPublisher> } | undefined;
  private own: Promise<AmqpConnection> | undefined;
  private readonly pending = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly config: CompiledConfig,
    private readonly options: EventPublisherOptions,
  ) {
    this.exchange = new BrokerNames(config.prefix).events;
  }

  /**
   * Publishes one event and resolves once the broker confirmed it, or once the failure was
   * logged. @returns the event, or undefined when it could not be published.
   */
  publish(type: EventType, subject: string | undefined, data: Record<string, unknown>): Promise<OjsEvent | undefined> {
    const event = createEvent(type, this.options.source, subject, data);
    if (this.closed) {
      this.options.log.warn('event not published: the event publisher is closed', { event_type: type, subject });
      return Promise.resolve(undefined);
    }
    const sent = this.send(event).then(
      () => event,
      (err: unknown) => {
        this.options.log.warn('event not published', {
          event_type: type,
          subject,
          exchange: this.exchange,
          err: err instanceof Error ? err.message : String(err),
        });
        return undefined;
      },
    );
    const tracked = sent.then(() => undefined);
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
    return sent;
  }

  /**
   * The sink administration takes (`onEvent`, see admin-events.ts): the subject is the
   * event's logical queue, or its tenant for `tenant.*` events.
   */
  readonly sink: AdminEventSink = async (event: AdminEvent): Promise<void> => {
    await this.publish(event.type, subjectOf(event), event.data);
  };

  /** Waits for the events in flight, then closes the channel (and the connection it opened itself). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.pending]);
    const current = this.current;
    this.current = undefined;
    if (current !== undefined) await current.publisher.then((publisher) => publisher.close()).catch(() => undefined);
    const own = this.own;
    this.own = undefined;
    if (own !== undefined) await own.then((connection) => connection.close()).catch(() => undefined);
  }

  private async send(event: OjsEvent): Promise<void> {
    const publisher = await this.channel();
    await publisher.publish(this.exchange, event.type, Buffer.from(JSON.stringify(event)), {
      contentType: EVENT_CONTENT_TYPE,
      messageId: event.id,
      type: event.type,
      timestamp: Math.floor(Date.parse(event.time) / 1000),
      appId: 'stagecoach',
      // An audit consumer's durable queue keeps them across a broker restart.
      persistent: true,
    });
  }

  /** The open channel on the current connection; a new one after the connection or the channel went. */
  private async channel(): Promise<ConfirmPublisher> {
    const connection = await this.connection();
    const current = this.current;
    if (current !== undefined && current.connection === connection) {
      const publisher = await current.publisher.catch(() => undefined);
      if (publisher?.isOpen === true) return publisher;
      if (this.current === current) this.current = undefined;
    }
    if (this.current === undefined || this.current.connection !== connection) {
      this.current = { connection, publisher: this.declareExchange(connection).then(() => ConfirmPublisher.open(connection)) };
    }
    return this.current.publisher;
  }

  private async connection(): Promise<AmqpConnection> {
    if (this.options.connection !== undefined) {
      const shared = this.options.connection();
      if (shared === undefined) throw new Error('not connected to the broker');
      return shared;
    }
    this.own ??= this.openOwn();
    try {
      return await this.own;
    } catch (err) {
      // Not cached: the next event tries again.
      this.own = undefined;
      throw err;
    }
  }

  private openOwn(): Promise<AmqpConnection> {
    return openConnection(this.config, this.options.log, `${this.options.source} events`);
  }

  /**
   * Declares the exchange before each new channel publishes on it: `tenant retire` or `queue
   * delete` may run against a broker `provision` never saw with this version, and `dev` puts its
   * queue settings before it declares its topology. Not with `security.tenantUsers`, where
   * `provision` declared it and a tenant user may not.
   */
  private async declareExchange(connection: AmqpConnection): Promise<void> {
    if (this.config.security.tenantUsers) return;
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    try {
      await channel.assertExchange(this.exchange, 'topic', { durable: this.config.durable });
      await channel.close();
    } catch (err) {
      // Declared before with other properties: it exists, so publishing still works.
      this.options.log.debug('events exchange not declared', { exchange: this.exchange, err: (err as Error).message });
    }
  }
}

/** What an administration event is about: its queue, else its tenant. */
function subjectOf(event: AdminEvent): string | undefined {
  const { queue, tenant } = event.data;
  if (event.type.startsWith('tenant.')) return typeof tenant === 'string' ? tenant : undefined;
  return typeof queue === 'string' ? queue : undefined;
}
