import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { jobCancelsExchange, jobCancelsStream, trackingExchange, trackingStream } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import { parseRecords, stamp, type MarkReport, type TrackingRecord } from './tracking-report.js';
import { publishRecord } from './tracking-stream.js';

/** The tracking stream, or the stream of `job cancel` directives (docs/job-state.md), which holds the same records. */
export type StreamKind = 'tracking' | 'job-cancels';

/** Deliveries the broker may send ahead on the stream (a stream consumer needs a prefetch). */
export const TRACKING_PREFETCH = 1000;

/**
 * Declares the tracking stream unless it exists: checked passively first, so a stream declared
 * with another `x-max-age` (the setting changed since) is read, not refused. Its exchange and
 * binding are declared either way (idempotent): records are written through them.
 */
export async function ensureTrackingStream(
  connection: AmqpConnection,
  config: CompiledConfig,
  which: StreamKind = 'tracking',
): Promise<void> {
  const spec = which === 'tracking' ? trackingStream(config) : jobCancelsStream(config);
  const exchange = which === 'tracking' ? trackingExchange(config) : jobCancelsExchange(config);
  const probe = await connection.createChannel();
  probe.on('error', () => undefined);
  let exists = false;
  try {
    await probe.checkQueue(spec.name);
    await probe.close();
    exists = true;
  } catch {
    // 404: the channel is closed by the broker; declare it on a fresh one.
  }
  // With tenant users, `provision` declared it all, and a stage's user may not declare it again.
  if (exists && config.security.tenantUsers) return;
  const channel = await connection.createChannel();
  try {
    if (!exists) await channel.assertQueue(spec.name, { durable: true, arguments: spec.arguments });
    await channel.assertExchange(exchange.name, exchange.type, { durable: exchange.durable });
    await channel.bindQueue(spec.name, exchange.name, '');
  } finally {
    await channel.close().catch(() => undefined);
  }
}

/**
 * Told of every record in stream order, with the `user_id` of the message that held it: the
 * broker validates it (a publisher cannot claim another user's), so with `security.tenantUsers`
 * it says who wrote the record.
 */
export type RecordHandler = (record: TrackingRecord, userId: string | undefined) => void;

/**
 * Reads the tracking stream from its first offset (a replay) and goes on reading what is
 * appended, handing every record to `onRecord` in stream order. `caughtUp()` publishes a `mark`
 * record and resolves once the reader has read it: everything published before the call has
 * then been handed over.
 */
export class TrackingReader {
  private readonly waiting = new Map<string, () => void>();
  private closed = false;
  /** The last delivery read and not yet acknowledged, and how many are behind it (see receive). */
  private unacked: ConsumeMessage | undefined;
  private unackedCount = 0;

  private constructor(
    private readonly channel: Channel,
    private readonly publisher: ConfirmPublisher,
    private readonly stream: string,
    private readonly onRecord: RecordHandler,
    private readonly log: Logger,
  ) {}

  static async open(
    connection: AmqpConnection,
    config: CompiledConfig,
    log: Logger,
    onRecord: RecordHandler,
    which: StreamKind = 'tracking',
  ): Promise<TrackingReader> {
    await ensureTrackingStream(connection, config, which);
    const names = new BrokerNames(config.prefix);
    const stream = which === 'tracking' ? names.tracking : names.jobCancels;
    const channel = await connection.createChannel();
    channel.on('error', (err: Error) => log.warn('tracking stream channel error', { err: err.message }));
    const publisher = await ConfirmPublisher.open(connection);
    const reader = new TrackingReader(channel, publisher, stream, onRecord, log);
    await channel.prefetch(TRACKING_PREFETCH);
    await channel.consume(stream, (message) => reader.receive(message), {
      noAck: false,
      arguments: { 'x-stream-offset': 'first' },
    });
    return reader;
  }

  /** Resolves when every record published before this call has been handed to `onRecord`. */
  async caughtUp(): Promise<void> {
    const mark = stamp<MarkReport>({ kind: 'mark' });
    const read = new Promise<void>((resolve) => this.waiting.set(mark.id, resolve));
    await publishRecord(this.publisher, this.stream, mark);
    await read;
  }

  /** Appends a record (the tracker's `announced`). */
  append(record: TrackingRecord): Promise<void> {
    return publishRecord(this.publisher, this.stream, record);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.publisher.close();
    await this.channel.close().catch(() => undefined);
  }

  private receive(message: ConsumeMessage | null): void {
    if (message === null) {
      if (!this.closed) this.log.warn('tracking stream consumer cancelled by the broker', { stream: this.stream });
      return;
    }
    this.acknowledge(message);
    const records = parseRecords(message.content);
    if (records.length === 0) {
      this.log.debug('skipping a message that holds no tracking record', { stream: this.stream });
      return;
    }
    const userId = typeof message.properties.userId === 'string' ? message.properties.userId : undefined;
    for (const record of records) {
      if (record.kind === 'mark') {
        const resolve = this.waiting.get(record.id);
        if (resolve !== undefined) {
          this.waiting.delete(record.id);
          resolve();
        }
        continue;
      }
      this.onRecord(record, userId);
    }
  }

  /**
   * Stream acks are credit, not deletion: acknowledging keeps the deliveries flowing. One ack
   * (`allUpTo`) per event-loop turn, or per half a prefetch, instead of one per message: a tracker
   * reads a message per stage turn, and each ack is work for the broker, which the stages share
   * (bench `--only jobstate`).
   */
  private acknowledge(message: ConsumeMessage): void {
    if (this.unacked === undefined) setImmediate(() => this.flushAcks());
    this.unacked = message;
    if (++this.unackedCount >= TRACKING_PREFETCH / 2) this.flushAcks();
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
      // The channel closed meanwhile (an error): it has no credit to give back, and its reader is done.
    }
  }
}
