import type { AmqpConnection } from '../../broker/amqp-connection.js';
import { isOpen } from '../../broker/connection-state.js';
import type { Logger } from '../../logging/logger.js';

/** Failed re-opens in a row, on a live connection, before a supervisor gives up. */
export const MAX_HEAL_ATTEMPTS = 5;
/** Wait before re-opening a lost channel, so that a persistent fault does not spin. */
export const HEAL_DELAY_MS = 1000;

export interface ChannelSupervisorOptions<T> {
  /** For log lines: `publisher`, `work`, `suspect`. */
  name: string;
  /**
   * Opens the channel on `connection`. It must call `lost` when the channel closes by itself (a
   * channel error, a deleted queue): only this supervisor's channel is then re-opened, with
   * `healing` set, so that it declares again what may have gone (a deleted queue or exchange).
   */
  open(connection: AmqpConnection, lost: (reason: string) => void, healing: boolean): Promise<T>;
  /** Closes a channel on purpose (stop). */
  close(channel: T): Promise<void>;
  /** A healthy channel of the previous generation can be told apart by this. */
  isOpen(channel: T): boolean;
  log: Logger;
  /** Called once when re-opening failed MAX_HEAL_ATTEMPTS times in a row on a live connection. */
  onFatal(err: Error): void;
  /** Called after every successful open, at attach and after healing. */
  onOpen?(channel: T): void;
  healDelayMs?: number;
}

/**
 * Keeps one channel of a runner open for as long as its connection lives, and heals only that
 * channel when it is lost: losing the publisher does not touch the consumers' deliveries, and
 * losing a consumer channel does not touch the publisher's confirms.
 *
 * Lifecycle: `attach(connection)` opens it (and throws when it cannot: start-up fails loudly);
 * a loss while the connection lives re-opens it after `healDelayMs`, and after
 * MAX_HEAL_ATTEMPTS failures in a row reports `onFatal`; `detach()` forgets it when the
 * connection is gone (the owner attaches again on the next connection); `close()` ends it for
 * good. `ready()` hands out the open channel, waiting for the next one while it heals.
 */
export class ChannelSupervisor<T> {
  private channel: T | undefined;
  private connection: AmqpConnection | undefined;
  private healing: NodeJS.Timeout | undefined;
  private failures = 0;
  private closed = false;
  private waiters: Array<{ resolve: (channel: T) => void; reject: (err: Error) => void; stale: T | undefined }> = [];

  constructor(private readonly options: ChannelSupervisorOptions<T>) {}

  get current(): T | undefined {
    return this.channel !== undefined && this.options.isOpen(this.channel) ? this.channel : undefined;
  }

  /** Opens the channel on a new connection; the old one's channel is forgotten. */
  async attach(connection: AmqpConnection): Promise<T> {
    if (this.closed) throw new Error(`${this.options.name} channel closed`);
    clearTimeout(this.healing);
    // Starts watching it now: isOpen() sees only a close after its first call, and heal() would
    // otherwise take a connection that closed before any heal for a live one (and re-open on it
    // until onFatal).
    isOpen(connection);
    this.connection = connection;
    this.channel = undefined;
    const channel = await this.open(connection, false);
    this.failures = 0;
    return channel;
  }

  /**
   * The connection is gone: its channel with it. Waiters are told, so that a settlement waiting
   * for a publisher leaves its delivery to the broker (the delivery's channel is gone too).
   */
  detach(): void {
    clearTimeout(this.healing);
    this.connection = undefined;
    this.channel = undefined;
    this.rejectWaiters(new Error(`${this.options.name} channel lost with its connection`));
  }

  /**
   * The open channel, other than `stale` (one that just failed): now if there is one, else
   * when it is healed. Rejects when the connection is lost or the supervisor closed.
   */
  ready(stale?: T): Promise<T> {
    const current = this.current;
    if (current !== undefined && current !== stale) return Promise.resolve(current);
    if (this.closed) return Promise.reject(new Error(`${this.options.name} channel closed`));
    if (this.connection === undefined) return Promise.reject(new Error(`${this.options.name} channel has no connection`));
    return new Promise<T>((resolve, reject) => this.waiters.push({ resolve, reject, stale }));
  }

  /** Ends it for good: no healing, waiters rejected, the channel closed. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.healing);
    this.rejectWaiters(new Error(`${this.options.name} channel closed`));
    const channel = this.channel;
    this.channel = undefined;
    if (channel !== undefined) await this.options.close(channel).catch(() => undefined);
  }

  private async open(connection: AmqpConnection, healing: boolean): Promise<T> {
    // Filled in once open: a loss reported before that is caught by the isOpen check below.
    const opened: { channel?: T } = {};
    const channel = await this.options.open(
      connection,
      (reason) => {
        // Only the current channel's loss counts: an old generation closing late is history.
        if (opened.channel !== undefined && opened.channel === this.channel) this.lost(connection, reason);
      },
      healing,
    );
    opened.channel = channel;
    if (this.closed || this.connection !== connection) {
      // Closed or reconnected while opening: nobody wants this channel.
      await this.options.close(channel).catch(() => undefined);
      throw new Error(`${this.options.name} channel no longer wanted`);
    }
    this.channel = channel;
    if (!this.options.isOpen(channel)) {
      // It closed before `lost` could recognise it as the current channel.
      this.lost(connection, 'closed while opening');
      throw new Error(`${this.options.name} channel closed while opening`);
    }
    this.options.onOpen?.(channel);
    for (const waiter of this.waiters.splice(0)) {
      if (waiter.stale === channel) this.waiters.push(waiter);
      else waiter.resolve(channel);
    }
    return channel;
  }

  private lost(connection: AmqpConnection, reason: string): void {
    if (this.closed || this.connection !== connection) return;
    this.channel = undefined;
    clearTimeout(this.healing);
    this.healing = setTimeout(() => void this.heal(connection, reason), this.options.healDelayMs ?? HEAL_DELAY_MS);
  }

  private async heal(connection: AmqpConnection, reason: string): Promise<void> {
    if (this.closed || this.connection !== connection || !isOpen(connection)) return;
    this.options.log.warn('channel lost while connected; re-opening it', { channel: this.options.name, reason });
    try {
      await this.open(connection, true);
      this.failures = 0;
    } catch (err) {
      if (this.closed || this.connection !== connection) return;
      // A fault that survives a few tries while the broker answers (a queue declared elsewhere
      // with other arguments, a missing permission) will not heal by itself.
      if (++this.failures >= MAX_HEAL_ATTEMPTS) {
        this.options.log.error('re-opening keeps failing; giving up', { channel: this.options.name, err: (err as Error).message });
        this.rejectWaiters(err as Error);
        this.options.onFatal(err as Error);
        return;
      }
      this.options.log.error('re-opening failed; retrying', { channel: this.options.name, err: (err as Error).message });
      this.lost(connection, reason);
    }
  }

  private rejectWaiters(err: Error): void {
    for (const waiter of this.waiters.splice(0)) waiter.reject(err);
  }
}
