import type { Channel } from 'amqplib';
import type { Logger } from '../logging/logger.js';
import type { AmqpConnection } from './amqp-connection.js';

/** How often the socket's byte count is looked at. */
export const STALL_TICK_MS = 1000;

/**
 * Tells a connection that stopped passing packets without being reset (a black-holed network
 * path, a NAT that forgot it) long before the heartbeat does (two to three heartbeats: 120-180 s
 * by default): it follows the bytes read from the socket, and when nothing came for a third of
 * `stallMs` it asks the broker for something (a `basic.qos` on a channel of its own, kept open:
 * no resource touched, no permission needed, no channel churn on the broker). A live broker
 * answers within a millisecond; a broker that said nothing for `stallMs` is unreachable, and the
 * process not ready. Costs nothing on a busy connection; on an idle one, one round trip of 31
 * bytes per `stallMs / 3` and one channel.
 *
 * Not counted while the broker blocks the connection (`isBlocked`): a blocked broker reads
 * nothing, by design, and resumes by itself. Nor across a stall of this process's own event loop
 * (the socket could not be read meanwhile): silence starts again after it.
 *
 * Lifecycle: `watch()` each new connection; `lost()` when it is gone or closing (the timer stops).
 */
export class StallWatch {
  private timer: NodeJS.Timeout | undefined;
  private socket: { bytesRead: number } | undefined;
  private connection: AmqpConnection | undefined;
  private bytesRead = 0;
  private heardAt = 0;
  private tickedAt = 0;
  private probing = false;
  /** The probe's channel, opened at the first probe and kept while it lives. */
  private channel: Promise<Channel> | undefined;
  private stalled = false;

  constructor(
    private readonly stallMs: number,
    private readonly log: Logger,
    private readonly isBlocked: () => boolean,
    private readonly clock: () => number = Date.now,
  ) {}

  /** How long the broker has said nothing, once that is `stallMs` or more; undefined otherwise. */
  get silentMs(): number | undefined {
    if (this.connection === undefined || this.isBlocked()) return undefined;
    const silent = this.clock() - this.heardAt;
    return silent >= this.stallMs ? silent : undefined;
  }

  watch(connection: AmqpConnection): void {
    this.lost();
    this.connection = connection;
    // The socket under amqplib's connection: not in its types, present in every version we use.
    this.socket = (connection as unknown as { connection?: { stream?: { bytesRead: number } } }).connection?.stream;
    this.bytesRead = this.socket?.bytesRead ?? 0;
    this.heardAt = this.tickedAt = this.clock();
    this.timer = setInterval(() => this.tick(), STALL_TICK_MS);
    this.timer.unref();
  }

  lost(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.connection = undefined;
    this.socket = undefined;
    this.channel = undefined; // it goes with its connection
    this.stalled = false;
  }

  /** One look at the socket; public for tests that drive the clock. */
  tick(): void {
    const now = this.clock();
    const read = this.socket?.bytesRead ?? 0;
    // A tick far later than asked: our own loop was stuck, the socket unread; the broker is not to blame.
    if (read !== this.bytesRead || now - this.tickedAt > 2 * STALL_TICK_MS || this.isBlocked()) {
      this.bytesRead = read;
      this.heardAt = now;
    }
    this.tickedAt = now;
    const silent = now - this.heardAt;
    if (silent >= this.stallMs / 3) this.probe();
    const stalled = this.silentMs !== undefined;
    if (stalled !== this.stalled) {
      this.stalled = stalled;
      if (stalled) this.log.warn('nothing from the broker for too long: the connection looks cut; not ready', { silent_ms: silent });
      else this.log.info('the broker answers again');
    }
  }

  /**
   * The probe's channel. A connection that cannot even open one (closing, or a test's stand-in)
   * answers with a rejection, never a throw out of the timer.
   */
  private openProbeChannel(connection: NonNullable<StallWatch['connection']>): Promise<Channel> {
    let created: Promise<Channel>;
    try {
      created = connection.createChannel();
    } catch (err) {
      created = Promise.reject(err as Error);
    }
    const opening: Promise<Channel> = created.then((channel) => {
      channel.on('error', () => undefined);
      channel.on('close', () => {
        if (this.channel === opening) this.channel = undefined;
      });
      return channel;
    });
    return opening;
  }

  /** A round trip the broker must answer; one at a time (a stalled one stays pending, and is not repeated). */
  private probe(): void {
    const connection = this.connection;
    if (this.probing || connection === undefined) return;
    this.probing = true;
    const opening = (this.channel ??= this.openProbeChannel(connection));
    opening
      .then((channel) => channel.prefetch(0))
      .catch(() => {
        if (this.channel === opening) this.channel = undefined;
      })
      .finally(() => (this.probing = false));
  }
}
