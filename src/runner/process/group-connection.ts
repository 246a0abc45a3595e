import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { ConnectionManager } from '../../broker/connection-manager.js';
import { BlockedWatch, type Blocked } from '../../broker/blocked-watch.js';
import { isOpen } from '../../broker/connection-state.js';
import { StallWatch } from '../../broker/stall-watch.js';
import type { Logger } from '../../logging/logger.js';
import type { StageMetrics } from '../../observability/stage-metrics.js';
import { settleWithin } from '../../util/settle-within.js';

/** Tries of a re-attach refused on a live connection, a second apart, before the group fails. */
export const REATTACH_ATTEMPTS = 5;
export const REATTACH_RETRY_MS = 1000;

/**
 * How long an attach may take before its connection is cut and everything attaches again on the
 * next one, in ms: this much, plus REATTACH_TIMEOUT_PER_RUNNER_MS per runner of the process
 * ({@link reattachTimeoutMs}). A pooled process of 10,000 tenants takes about 40 s to attach
 * (docs/performance.md): its bound, 160 s, is four times that; a process of a few runners gets a
 * minute.
 */
export const REATTACH_TIMEOUT_MS = 60_000;
export const REATTACH_TIMEOUT_PER_RUNNER_MS = 10;

/** The attach bound of a process of `runners` runners (see REATTACH_TIMEOUT_MS). */
export function reattachTimeoutMs(runners: number): number {
  return REATTACH_TIMEOUT_MS + runners * REATTACH_TIMEOUT_PER_RUNNER_MS;
}

/** What the group uses of its {@link ConnectionManager} (a unit test passes a stub). */
export type ManagedConnection = Pick<
  ConnectionManager,
  'connection' | 'connected' | 'node' | 'connections' | 'start' | 'close' | 'cut' | 'drop' | 'on' | 'once' | 'off'
>;

export interface GroupConnectionOptions {
  log: Logger;
  /** `stagecoach_connection_up`, `stagecoach_connection_blocked` and `stagecoach_reconnects_total`. */
  metrics: Pick<StageMetrics, 'setConnected' | 'setBlocked' | 'reconnected'>;
  /**
   * Attaches everything of the process on a connection: the first one, and each one after a loss.
   * `step` is told where it is (`runners`, `control listener`...): an attach out of time is
   * logged with the step it was stuck at.
   */
  attach(connection: AmqpConnection, step: (where: string) => void): Promise<void>;
  /** The connection is gone, and every channel on it: what was opened there is to be forgotten. */
  onLost(): void;
  /** A re-attach a live broker refused `reattachAttempts` times: the process cannot recover by itself. */
  onFatal(err: Error): void;
  /** `broker.stallTimeout`, in ms: silence from the broker before the connection counts as stalled. */
  stallMs: number;
  /** @defaultValue REATTACH_ATTEMPTS */
  reattachAttempts?: number;
  /** @defaultValue REATTACH_RETRY_MS */
  reattachRetryMs?: number;
  /** The attach bound, ms, read at each attach (a pooled process grows). @defaultValue REATTACH_TIMEOUT_MS */
  reattachTimeoutMs?: number | (() => number);
}

/**
 * The one connection of a process and what keeps the process on it: the manager reconnects
 * (backoff, the next node of a cluster first), and this class attaches everything again on each
 * new connection.
 *
 * Lifecycle: `start()` resolves with the first connection (retrying while the broker is
 * unreachable); nothing is re-attached until `attachFirst()`, since the group still checks and
 * provisions on that first connection. From `attachFirst()` on, every new connection re-attaches
 * everything; a re-attach refused on a live connection is tried again a few times (a broker just
 * restarted may refuse for a moment what it holds) before `onFatal`; one cut short by another
 * loss waits for the next connection. `halt()` (the group stopping) ends the re-attaching and a
 * pending `next()`; `close()` closes the connection, last.
 *
 * Every attach is bounded (`reattachTimeoutMs`): amqplib's RPCs have no timeout, and a broker
 * that never answers one, or a promise of a lost connection that never settles, would leave the
 * process attached to nothing for ever, while the broker's heartbeats keep the connection looking
 * alive (the stall watch hears them). Past the bound the connection is dropped (its socket
 * destroyed): the manager reconnects and everything attaches again from scratch on the next one;
 * what was unacknowledged on it goes back to its queues. Not while the broker blocks the
 * connection (a resource alarm): it then answers nothing by design, and would block the next one.
 */
export class GroupConnection {
  private following = false;
  private halted = false;
  /** Set while `next()` waits for a connection: `halt()` ends the wait. */
  private stopWaiting: ((err: Error) => void) | undefined;
  private readonly blocking: BlockedWatch;
  private readonly stall: StallWatch;

  constructor(
    private readonly manager: ManagedConnection,
    private readonly options: GroupConnectionOptions,
  ) {
    this.blocking = new BlockedWatch(options.log, (blocked) => options.metrics.setBlocked(blocked));
    this.stall = new StallWatch(options.stallMs, options.log, () => this.blocking.state !== undefined);
  }

  /** How long the broker has said nothing, once past `stallMs` (a connection cut without a reset); undefined otherwise. */
  get silentMs(): number | undefined {
    return this.stall.silentMs;
  }

  /** Set while the broker blocks the connection (a resource alarm): since when and why. */
  get blocked(): Blocked | undefined {
    return this.blocking.state;
  }

  /** The connection up now; undefined while disconnected. */
  get current(): AmqpConnection | undefined {
    return this.manager.connection;
  }

  /** True from `attachFirst()` on: every new connection re-attaches everything. */
  get attached(): boolean {
    return this.following;
  }

  get connected(): boolean {
    return this.manager.connected;
  }

  /** `host:port` of the broker node connected to; undefined while disconnected. */
  get node(): string | undefined {
    return this.manager.node;
  }

  /** Connections made; above 1 means the process reconnected. */
  get connections(): number {
    return this.manager.connections;
  }

  /** Resolves with the first connection; retries until it gets one or `close()` is called. */
  start(): Promise<AmqpConnection> {
    this.manager.on('connected', (connection: AmqpConnection) => this.connectedTo(connection));
    this.manager.on('disconnected', () => {
      this.options.metrics.setConnected(false);
      this.blocking.lost();
      this.stall.lost();
      this.options.onLost();
    });
    return this.manager.start();
  }

  /**
   * From now on every new connection re-attaches everything, this first one included if it
   * drops while attaching (a broker restarting just as the stage starts).
   * @throws what the attach threw, when the connection is still open (a refusal, not a loss).
   */
  async attachFirst(connection: AmqpConnection): Promise<void> {
    this.following = true;
    try {
      await this.attachWithin(connection);
    } catch (err) {
      if (isOpen(connection)) throw err;
      this.options.log.warn('connection lost while starting; attaching on the next connection', { err: (err as Error).message });
    }
  }

  /** The first connection after `lost`, as the manager reconnects; rejected by `halt()`. */
  next(lost: AmqpConnection): Promise<AmqpConnection> {
    const current = this.manager.connection;
    if (current !== undefined && current !== lost) return Promise.resolve(current);
    return new Promise<AmqpConnection>((resolve, reject) => {
      const connected = (connection: AmqpConnection): void => {
        this.stopWaiting = undefined;
        resolve(connection);
      };
      this.manager.once('connected', connected);
      this.stopWaiting = (err) => {
        this.stopWaiting = undefined;
        this.manager.off('connected', connected);
        reject(err);
      };
    });
  }

  /** The process is stopping: nothing is re-attached from now on, and a pending `next()` is rejected with `reason`. */
  halt(reason: Error): void {
    this.halted = true;
    this.stopWaiting?.(reason);
  }

  /**
   * Closes the connection (its channels first, so no acknowledgement is lost), waiting at most
   * `timeoutMs` for the broker; a `start()` still connecting gives up.
   */
  close(timeoutMs?: number): Promise<void> {
    this.stall.lost();
    return this.manager.close(timeoutMs);
  }

  /** A stop out of time: the socket is destroyed now, open or closing; unacknowledged deliveries go back. */
  cut(): void {
    this.stall.lost();
    this.manager.cut();
  }

  private connectedTo(connection: AmqpConnection): void {
    this.options.metrics.setConnected(true);
    this.blocking.watch(connection);
    this.stall.watch(connection);
    if (!this.following) return;
    this.options.metrics.reconnected();
    void this.reattach(connection);
  }

  private async reattach(connection: AmqpConnection, attempt = 1): Promise<void> {
    if (this.halted) return;
    const { log } = this.options;
    try {
      await this.attachWithin(connection);
    } catch (err) {
      if (!isOpen(connection)) {
        // The connection dropped again mid-way: the next 'connected' starts over.
        log.warn('re-attaching after reconnect failed; the connection went again', { err: (err as Error).message });
        return;
      }
      if (attempt < (this.options.reattachAttempts ?? REATTACH_ATTEMPTS)) {
        // A broker just restarted may refuse for a moment what it holds (a stream whose home
        // node "is down or inaccessible" until it has started): a few tries before giving up.
        log.warn('re-attaching after reconnect failed on a live connection; trying again', { attempt, err: (err as Error).message });
        setTimeout(() => {
          if (this.manager.connection === connection) void this.reattach(connection, attempt + 1);
        }, this.options.reattachRetryMs ?? REATTACH_RETRY_MS);
        return;
      }
      // Refused by a live broker (a queue declared elsewhere with other arguments): it will not
      // heal by itself, and a stage that silently stops consuming is the worst outcome.
      log.error('re-attaching after reconnect failed on a live connection; giving up', { err: (err as Error).message });
      this.options.onFatal(err as Error);
    }
  }

  /**
   * `options.attach` on `connection`, within the bound (see the class): past it, the connection
   * is dropped and this resolves, the attach left to fail with its connection; the manager's next
   * 'connected' attaches everything again. Throws what the attach threw in time.
   */
  private async attachWithin(connection: AmqpConnection): Promise<void> {
    let step = 'starting';
    const attaching = this.options.attach(connection, (where) => (step = where)).then(() => true);
    const bound = this.options.reattachTimeoutMs;
    for (;;) {
      const timeoutMs = (typeof bound === 'function' ? bound() : bound) ?? REATTACH_TIMEOUT_MS;
      if ((await settleWithin(attaching, timeoutMs)) !== undefined) return;
      // Lost meanwhile (the next connection starts over), or stopping (the stop cuts what is left).
      if (this.halted || this.manager.connection !== connection) return;
      if (this.blocking.state === undefined) {
        this.options.log.error('attaching to the broker did not finish in time; dropping the connection to attach everything again', {
          stuck_at: step,
          timeout_ms: timeoutMs,
        });
        this.manager.drop('attaching on it did not finish in time');
        return;
      }
      this.options.log.warn('attaching to the broker waits while the broker blocks the connection', { stuck_at: step });
    }
  }
}
