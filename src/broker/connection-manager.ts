import { closeWithin, cutConnection, CLOSE_TIMEOUT_MS } from './close-within.js';
import { EventEmitter } from 'node:events';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { openConnection, redact, type AmqpConnection } from './amqp-connection.js';
import { nodeLabel, nodeOf } from './broker-nodes.js';
import { isOpen } from './connection-state.js';
import { reconnectDelayMs } from './reconnect-backoff.js';

/**
 * Keeps one AMQP connection up for as long as it is not closed: connects with exponential
 * backoff and jitter (`broker.reconnect`), at start-up too, and again whenever the broker drops
 * it (restart, forced close, missed heartbeats, network).
 *
 * Events: 'connected' (connection) each time a connection is up, including the first;
 * 'disconnected' (error) when an established connection is lost. Listeners re-create their
 * channels on 'connected'; nothing from the old connection (channels, delivery tags) survives.
 */
export class ConnectionManager extends EventEmitter {
  private current: AmqpConnection | undefined;
  /** The connection `close()` is closing: `cut()` destroys it when its close takes too long. */
  private closingConnection: AmqpConnection | undefined;
  private closing = false;
  private attempts = 0;
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  /** Connections made so far; more than one means it reconnected. */
  connections = 0;
  /** The node (index in `broker.urls`) the next attempt starts at: after a loss, the one after the lost node. */
  private firstNode = 0;

  constructor(
    private readonly config: CompiledConfig,
    private readonly log: Logger,
    private readonly name: string,
  ) {
    super();
  }

  get connection(): AmqpConnection | undefined {
    return this.current;
  }

  get connected(): boolean {
    return this.current !== undefined;
  }

  /** `host:port` of the node the connection is up to; undefined while disconnected. */
  get node(): string | undefined {
    return this.current === undefined ? undefined : nodeOf(this.current)?.label;
  }

  /** Resolves with the first connection; retries until it gets one or `close()` is called. */
  async start(): Promise<AmqpConnection> {
    for (;;) {
      if (this.closing) throw new Error('connection manager closed before it connected');
      try {
        return await this.connect();
      } catch (err) {
        const delay = this.nextDelay();
        this.log.warn(`cannot reach the broker at ${this.where()}; retrying in ${(delay / 1000).toFixed(1)} s`, {
          err: (err as Error).message,
          attempt: this.attempts,
        });
        await this.sleep(delay);
      }
    }
  }

  /** Closes the connection, waiting at most `timeoutMs` for the broker (then its socket is destroyed); stops reconnecting. */
  async close(timeoutMs = CLOSE_TIMEOUT_MS): Promise<void> {
    this.closing = true;
    clearTimeout(this.timer);
    this.wake?.();
    const connection = this.current;
    this.current = undefined;
    if (connection === undefined) return;
    this.closingConnection = connection;
    if (!(await closeWithin(connection, timeoutMs))) {
      this.log.warn('the broker did not answer the connection close in time; its socket was destroyed', { timeout_ms: timeoutMs });
    }
  }

  /**
   * Destroys the connection's socket at once, open or closing (a stop out of time), and stops
   * reconnecting: what is unacknowledged on it goes back to its queues.
   */
  cut(): void {
    this.closing = true;
    clearTimeout(this.timer);
    this.wake?.();
    const connection = this.current ?? this.closingConnection;
    this.current = undefined;
    if (connection !== undefined) cutConnection(connection);
  }

  /**
   * Destroys the connection's socket at once and reconnects, as after any loss: for a connection
   * that looks alive but is of no use (a re-attach on it that never finished). What is
   * unacknowledged on it goes back to its queues. Unlike `cut()`, reconnecting goes on.
   * @param reason why, for the log line of the loss
   */
  drop(reason: string): void {
    const connection = this.current;
    if (connection !== undefined && !this.closing) cutConnection(connection, `connection dropped: ${reason}`);
  }

  private async connect(): Promise<AmqpConnection> {
    const connection = await openConnection(this.config, this.log, this.name, this.firstNode);
    if (this.closing) {
      // close() was called while this attempt was under way: nobody wants this connection.
      await connection.close().catch(() => undefined);
      throw new Error('connection manager closed');
    }
    this.attempts = 0;
    this.connections++;
    this.current = connection;
    // Watched from birth: `isOpen()` only knows about a close it was watching for.
    isOpen(connection);
    connection.once('close', (err?: Error) => this.onClose(connection, err));
    const node = nodeOf(connection)?.label;
    if (this.connections > 1) this.log.info('reconnected to the broker', { connections: this.connections, node });
    else this.log.info('connected to the broker', { node });
    this.emit('connected', connection);
    return connection;
  }

  private onClose(connection: AmqpConnection, err?: Error): void {
    if (this.current !== connection) return;
    this.current = undefined;
    if (this.closing) return;
    const lost = nodeOf(connection);
    // The node that dropped us is likely down: the others first, it last (it may be the only one).
    if (lost !== undefined) this.firstNode = lost.index + 1;
    this.log.warn('broker connection lost; reconnecting', { err: err?.message, node: lost?.label });
    this.emit('disconnected', err ?? new Error('connection closed'));
    void this.start().catch(() => undefined);
  }

  /** The broker in log lines: its URL without the password, or a cluster's nodes. */
  private where(): string {
    const urls = this.config.broker.urls;
    return urls.length === 1 ? redact(urls[0]) : `any of ${urls.map(nodeLabel).join(', ')}`;
  }

  private nextDelay(): number {
    return reconnectDelayMs(this.attempts++, this.config.broker.reconnect);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, ms);
    });
  }
}
