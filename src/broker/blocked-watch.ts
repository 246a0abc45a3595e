import type { Logger } from '../logging/logger.js';
import type { AmqpConnection } from './amqp-connection.js';

/** The broker blocks the connection: since when, and why (its words, e.g. "low on memory"). */
export interface Blocked {
  reason: string;
  /** ISO 8601. */
  since: string;
}

/**
 * Follows the broker's `connection.blocked` / `connection.unblocked` on the process's connection.
 * During a resource alarm (memory or disk, on any node of the cluster) the broker stops reading
 * from every connection that publishes: nothing moves (no confirm, no ack, no close answered)
 * until the alarm clears, when everything resumes by itself. Without this the process would look
 * healthy while doing nothing.
 *
 * Lifecycle: `watch()` each new connection (a new one starts unblocked: the broker tells again
 * if it blocks it); `lost()` when it is gone. `onChange` gets every change of the state.
 */
export class BlockedWatch {
  private blockedAt: number | undefined;
  private reason = '';
  private watched: AmqpConnection | undefined;

  constructor(
    private readonly log: Logger,
    private readonly onChange: (blocked: boolean) => void,
  ) {}

  /** Undefined while the broker reads from the connection. */
  get state(): Blocked | undefined {
    if (this.blockedAt === undefined) return undefined;
    return { reason: this.reason, since: new Date(this.blockedAt).toISOString() };
  }

  watch(connection: AmqpConnection): void {
    this.clear();
    this.watched = connection;
    connection.on('blocked', (reason?: string) => {
      if (this.watched !== connection) return;
      this.blockedAt ??= Date.now();
      this.reason = reason ?? 'unknown';
      this.log.warn('the broker blocked the connection: nothing is published, confirmed or acknowledged until it unblocks it', {
        reason: this.reason,
      });
      this.onChange(true);
    });
    connection.on('unblocked', () => {
      if (this.watched !== connection || this.blockedAt === undefined) return;
      const blockedMs = Date.now() - this.blockedAt;
      this.clear();
      this.log.info('the broker unblocked the connection', { blocked_ms: blockedMs });
    });
  }

  /** The connection is gone: its blocked state with it. */
  lost(): void {
    this.watched = undefined;
    this.clear();
  }

  private clear(): void {
    if (this.blockedAt === undefined) return;
    this.blockedAt = undefined;
    this.reason = '';
    this.onChange(false);
  }
}
