import type { Channel, ConfirmChannel, Options } from 'amqplib';
import { PublishError, QueueFullError } from '../errors/errors.js';
import { OJS_HEADERS } from '../job/amqp-mapping.js';
import { publisherUserId, type AmqpConnection } from './amqp-connection.js';
import { unencodable } from './encodable.js';

/** Something that publishes with confirms: a {@link ConfirmPublisher}, or a runner's healing one. */
export interface PublishChannel {
  /**
   * Resolves when the broker confirmed the message; rejects with a PublishError otherwise.
   * `lost`: once aborted, a publish still waiting to be sent (for a drain, a healed channel) is
   * dropped, rejected with its reason (JobSink.send).
   * `sent`: called once the message is handed to a channel (after any wait for a drain or a healed
   *   channel), before its confirm: what `ctx.emit` resolves on (JobContext). It may be called
   *   again when the same message is tried again (a `block` queue full); callers ignore repeats.
   */
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Options.Publish,
    lost?: AbortSignal,
    sent?: () => void,
  ): Promise<void>;
  /**
   * The ready messages of `queue`, read on a channel of its own (a passive declare); undefined
   * when the broker does not answer within {@link READY_CHECK_MS} or refuses (a queue without a
   * leader). Asked only after a refusal (broker/refusal-cause.ts); a channel without it keeps
   * every refusal as QUEUE_FULL.
   */
  readyMessages?(queue: string): Promise<number | undefined>;
}

/** How long a refusal's check waits for the broker to read the queue: a leaderless quorum queue may not answer. */
export const READY_CHECK_MS = 2_000;

/**
 * One long-lived confirm channel with many confirms outstanding. Each `publish()` resolves
 * when the broker acks that message and rejects when it nacks it (a full queue with
 * `reject-publish`) or the channel closes first.
 *
 * amqplib's `publish()` returning false means "buffered, wait for 'drain'", not "failed": the
 * message is still sent and confirmed. Later publishes wait for the drain instead of growing
 * the buffer without bound.
 *
 * Every failure is a PublishError; `transient` says whether trying again on another channel
 * may work (the channel was lost) or not (the broker or the encoder refused the message).
 *
 * A nack on a live channel is a {@link QueueFullError}: stagecoach's topology refuses a message
 * for room in one way only, a main queue at its `max_size` with `reject-publish` (dead-letter
 * queues drop their head instead, `due` and `suspect` are unbounded, unroutable messages go to
 * the alternate exchange). RabbitMQ also nacks when a quorum queue has no leader, as during a
 * failover; the confirm does not say which, so the JobRouter checks a refusal before believing
 * it (broker/refusal-cause.ts, with {@link readyMessages}).
 */
export class ConfirmPublisher implements PublishChannel {
  private drained: Promise<void> | undefined;
  private closed: Error | undefined;
  private releaseDrain: (() => void) | undefined;
  /**
   * Each publish sent and not yet confirmed: what fails it as lost with the channel. amqplib is
   * meant to fail them when the channel closes, but (0.10.9, amqplib issue 191) it stops at the
   * first slot already confirmed out of order (confirms from several queues come in any order),
   * and every publish behind it would wait for ever: its job never settles, and whatever waits
   * for the process's jobs in flight (an isolation window, a stop) with it. Failed here instead.
   */
  private readonly unconfirmed = new Set<() => void>();
  /** Resolves when the channel has closed, however: what `close()` waits for at most. */
  private readonly channelClosed: Promise<void>;

  private constructor(
    private readonly channel: ConfirmChannel,
    /** Where a refusal's check opens its channel (readyMessages). */
    private readonly connection: AmqpConnection,
    onLost?: () => void,
    /** Stamped as `user_id` on every message when set (see `publisherUserId`). */
    private readonly userId?: string,
    private readonly onQueueFull?: QueueFullObserver,
  ) {
    this.channelClosed = new Promise<void>((resolve) => channel.once('close', () => resolve()));
    channel.on('drain', () => this.onDrain());
    channel.on('error', (err: Error) => {
      this.closed = err;
    });
    channel.on('close', () => {
      const expected = this.closed !== undefined && this.closed.message === 'publisher closed';
      this.closed ??= new Error('publish channel closed');
      // After amqplib's own listener (registered first): what it failed is settled already.
      for (const lose of this.unconfirmed) lose();
      this.unconfirmed.clear();
      this.onDrain();
      if (!expected) onLost?.();
    });
  }

  /**
   * @param onLost called when the channel closes other than by `close()`.
   * @param onQueueFull told of every QUEUE_FULL refusal before the publish rejects with it (events
   *   and metrics: see events/queue-full-reporter.ts); what it throws is ignored.
   */
  static async open(connection: AmqpConnection, onLost?: () => void, onQueueFull?: QueueFullObserver): Promise<ConfirmPublisher> {
    return new ConfirmPublisher(await connection.createConfirmChannel(), connection, onLost, publisherUserId(connection), onQueueFull);
  }

  get isOpen(): boolean {
    return this.closed === undefined;
  }

  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Options.Publish,
    lost?: AbortSignal,
    sent?: () => void,
  ): Promise<void> {
    // Not async: while the channel is not saturated, a publish costs one promise.
    if (this.drained) {
      return this.drained.then(() =>
        lost?.aborted === true ? Promise.reject(lost.reason as Error) : this.publish(exchange, routingKey, content, options, lost, sent),
      );
    }
    if (this.closed) {
      return Promise.reject(new PublishError(`cannot publish to "${exchange}": ${this.closed.message}`, exchange, routingKey, true));
    }
    const stamped = this.userId === undefined ? options : { ...options, userId: this.userId };
    const refused = unencodable(exchange, routingKey, stamped);
    if (refused !== undefined) {
      return Promise.reject(new PublishError(`cannot publish to "${exchange}" (${routingKey}): ${refused}`, exchange, routingKey, false));
    }
    return new Promise<void>((resolve, reject) => {
      const channelLost = (reason: string): void =>
        reject(new PublishError(`broker refused job for "${exchange}" (${routingKey}): ${reason}`, exchange, routingKey, true));
      const lose = (): void => channelLost('channel closed');
      let ok: boolean;
      try {
        ok = this.channel.publish(exchange, routingKey, content, stamped, (err: unknown) => {
          this.unconfirmed.delete(lose);
          if (err) {
            const reason = err instanceof Error ? err.message : String(err);
            // amqplib fails pending confirms with 'channel closed' when the channel goes away.
            if (reason.includes('closed')) {
              channelLost(reason);
              return;
            }
            const full = queueFull(exchange, routingKey, stamped.headers);
            try {
              this.onQueueFull?.(full);
            } catch {
              // Events and metrics are information: they never change what the publisher reports.
            }
            reject(full);
          } else resolve();
        });
      } catch (err) {
        reject(this.unsent(err, exchange, routingKey));
        return;
      }
      this.unconfirmed.add(lose);
      sent?.();
      if (!ok && !this.drained) {
        this.drained = new Promise<void>((release) => {
          this.releaseDrain = release;
        });
      }
    });
  }

  /**
   * amqplib's `publish()` threw: nothing was sent. An IllegalOperationError means the channel
   * (or its connection) is closing or closed, which is transient. Anything else (a message it
   * cannot encode that `unencodable` did not foresee) is the message's fault, but amqplib had already queued the confirm
   * callback, so its confirms are now one slot off the broker's delivery tags: a later nack
   * would be taken for an ack. The channel is retired either way, its owner told by `onLost`,
   * and publishes waiting for a drain are released to fail fast.
   */
  private unsent(err: unknown, exchange: string, routingKey: string): PublishError {
    const reason = err instanceof Error ? err.message : String(err);
    const closing = err instanceof Error && err.name === 'IllegalOperationError';
    if (this.closed === undefined) {
      this.closed = closing ? (err as Error) : new Error(`publish channel retired after a message it could not send (${reason})`);
      if (!closing) this.channel.close().catch(() => undefined);
    }
    this.onDrain();
    return new PublishError(`cannot publish to "${exchange}" (${routingKey}): ${reason}`, exchange, routingKey, closing, { cause: err });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = new Error('publisher closed');
    try {
      // Waits for outstanding confirms, then closes; each wait ends with the channel at the latest:
      // amqplib's channel close in progress when its connection goes never answers (a stop would
      // wait until its grace period).
      await Promise.race([this.channel.waitForConfirms(), this.channelClosed]);
      await Promise.race([this.channel.close(), this.channelClosed]);
    } catch {
      // Already closed with its connection: the pending publishes were rejected.
    }
  }

  async readyMessages(queue: string): Promise<number | undefined> {
    let channel: Channel | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      // A channel of its own: a passive declare of a missing queue closes its channel.
      const opened = await this.connection.createChannel();
      channel = opened;
      opened.on('error', () => undefined);
      // Rejected by the close below when the broker does not answer in time: that is undefined too.
      const ready = opened.checkQueue(queue).then(
        (ok) => ok.messageCount,
        () => undefined,
      );
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), READY_CHECK_MS);
      });
      return await Promise.race([ready, late]);
    } catch {
      return undefined;
    } finally {
      clearTimeout(timer);
      channel?.close().catch(() => undefined);
    }
  }

  private onDrain(): void {
    const release = this.releaseDrain;
    this.drained = undefined;
    this.releaseDrain = undefined;
    release?.();
  }
}

/** Told of a refusal for a full queue (see {@link ConfirmPublisher.open}). */
export type QueueFullObserver = (refusal: QueueFullError) => void;

/** The refusal of a nacked message, with the job's queue and tenant when it carries stagecoach's headers. */
function queueFull(exchange: string, routingKey: string, headers: Record<string, unknown> | undefined): QueueFullError {
  const queue = headers?.[OJS_HEADERS.queue];
  const tenant = headers?.[OJS_HEADERS.tenant];
  return new QueueFullError(exchange, routingKey, {
    ...(typeof queue === 'string' ? { queue } : {}),
    ...(typeof tenant === 'string' ? { tenant } : {}),
    ...(headers === undefined ? {} : { headers }),
  });
}
