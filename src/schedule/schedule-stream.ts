import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher, type PublishChannel } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { schedulesExchange, schedulesStream } from '../topology/build-topology.js';
import { ScheduleBook } from './schedule-book.js';
import { parseScheduleRecord, SCHEDULE_CONTENT_TYPE, scheduleRecord, type ScheduleRecord } from './schedule-records.js';

/** Deliveries the broker may send ahead on the stream. */
const PREFETCH = 500;

/**
 * Declares the schedules stream, its exchange and their binding unless the stream exists (a
 * passive check first: a tenant user may not declare, and `provision` did).
 */
export async function ensureSchedulesStream(connection: AmqpConnection, config: CompiledConfig): Promise<void> {
  const stream = schedulesStream(config);
  const exchange = schedulesExchange(config);
  const probe = await connection.createChannel();
  probe.on('error', () => undefined);
  let exists = false;
  try {
    await probe.checkQueue(stream.name);
    await probe.close();
    exists = true;
  } catch {
    // 404: the broker closed the probe's channel; declare on a fresh one.
  }
  if (exists && config.security.tenantUsers) return;
  const channel = await connection.createChannel();
  try {
    if (!exists) await channel.assertQueue(stream.name, { durable: true, arguments: stream.arguments });
    await channel.assertExchange(exchange.name, exchange.type, { durable: exchange.durable });
    await channel.bindQueue(stream.name, exchange.name, '');
  } finally {
    await channel.close().catch(() => undefined);
  }
}

/** Appends one record through the stream's exchange, confirmed. */
export function publishScheduleRecord(publisher: PublishChannel, config: CompiledConfig, record: ScheduleRecord): Promise<void> {
  return publisher.publish(schedulesExchange(config).name, '', encodeScheduleRecord(record), scheduleRecordOptions(record));
}

export function encodeScheduleRecord(record: ScheduleRecord): Buffer {
  return Buffer.from(JSON.stringify(record));
}

export function scheduleRecordOptions(record: ScheduleRecord): { contentType: string; messageId: string; type: string; persistent: true } {
  return { contentType: SCHEDULE_CONTENT_TYPE, messageId: record.id, type: `schedule.${record.kind}`, persistent: true };
}

/**
 * Reads the schedules stream from its first offset into a {@link ScheduleBook} and goes on
 * following it; appends records with confirms. `caughtUp()` writes a `mark` and resolves once it
 * is read back: everything appended before the call is then in the book.
 */
export class ScheduleStream {
  private readonly waiting = new Map<string, () => void>();
  private closed = false;
  private unacked: ConsumeMessage | undefined;
  private unackedCount = 0;

  private constructor(
    readonly book: ScheduleBook,
    private readonly config: CompiledConfig,
    private readonly channel: Channel,
    private readonly publisher: ConfirmPublisher,
    private readonly log: Logger,
    /** A connection the stream owns: closed with it. */
    private readonly owned: AmqpConnection | undefined,
  ) {}

  /** @param owned the connection, when the stream is to close it (its own). */
  static async open(
    connection: AmqpConnection,
    config: CompiledConfig,
    log: Logger,
    book = new ScheduleBook(),
    owned?: AmqpConnection,
  ): Promise<ScheduleStream> {
    await ensureSchedulesStream(connection, config);
    const channel = await connection.createChannel();
    channel.on('error', (err: Error) => log.warn('schedules stream channel error', { err: err.message }));
    const publisher = await ConfirmPublisher.open(connection);
    const stream = new ScheduleStream(book, config, channel, publisher, log, owned);
    book.onDropped((covers) =>
      log.warn('schedules stream: a snapshot came after more records than kept, the oldest of them not folded again', { covers }),
    );
    await channel.prefetch(PREFETCH);
    await channel.consume(schedulesStream(config).name, (message) => stream.receive(message), {
      noAck: false,
      arguments: { 'x-stream-offset': 'first' },
    });
    return stream;
  }

  /** Resolves when every record appended before the call is in the book. */
  async caughtUp(): Promise<void> {
    const mark = scheduleRecord({ kind: 'mark' });
    const read = new Promise<void>((resolve) => this.waiting.set(mark.id, resolve));
    await this.append(mark);
    await read;
  }

  /** Appends a record, confirmed; it is in the book once read back (see caughtUp). */
  append(record: ScheduleRecord): Promise<void> {
    return publishScheduleRecord(this.publisher, this.config, record);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.publisher.close();
    await this.channel.close().catch(() => undefined);
    await this.owned?.close().catch(() => undefined);
  }

  private receive(message: ConsumeMessage | null): void {
    if (message === null) {
      if (!this.closed) this.log.warn('schedules stream consumer cancelled by the broker');
      return;
    }
    this.acknowledge(message);
    const record = parseScheduleRecord(message.content);
    if (record === undefined) return;
    if (record.kind === 'mark') {
      const resolve = this.waiting.get(record.id);
      if (resolve !== undefined) {
        this.waiting.delete(record.id);
        resolve();
      }
      return;
    }
    try {
      this.book.apply(record);
    } catch (err) {
      this.log.error('schedule record not folded', { record: record.id, kind: record.kind, err: (err as Error).message });
    }
  }

  /** Stream acks are credit: one per event-loop turn, or per half a prefetch (as TrackingReader's). */
  private acknowledge(message: ConsumeMessage): void {
    if (this.unacked === undefined) setImmediate(() => this.flushAcks());
    this.unacked = message;
    if (++this.unackedCount >= PREFETCH / 2) this.flushAcks();
  }

  private flushAcks(): void {
    const last = this.unacked;
    if (last === undefined) return;
    this.unacked = undefined;
    this.unackedCount = 0;
    if (this.closed) return;
    try {
      this.channel.ack(last, true);
    } catch {
      // The channel closed meanwhile: its reader is done.
    }
  }
}
