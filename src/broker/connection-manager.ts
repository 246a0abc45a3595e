import { EventEmitter } from 'node:events';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { openConnection, redact, type AmqpConnection } from './amqp-connection.js';
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
  private closing = false;
  private attempts = 0;
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  /** Connections made so far; more than one means it reconnected. */
  connections = 0;

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

  /** Resolves with the first connection; retries until it gets one or `close()` is called. */
  async start(): Promise<AmqpConnection> {
    for (;;) {
      if (this.closing) throw new Error('connection manager closed before it connected');
      try {
        return await this.connect();
      } catch (err) {
        const delay = this.nextDelay();
        this.log.warn(`cannot reach the broker at ${redact(this.config.broker.url)}; retrying in ${(delay / 1000).toFixed(1)} s`, {
          err: (err as Error).message,
          attempt: this.attempts,
        });
        await this.sleep(delay);
      }
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.timer);
    this.wake?.();
    const connection = this.current;
    this.current = undefined;
    await connection?.close().catch(() => undefined);
  }

  private async connect(): Promise<AmqpConnection> {
    const connection = await openConnection(this.config, this.log, this.name);
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
    if (this.connections > 1) this.log.info('reconnected to the broker', { connections: this.connections });
    this.emit('connected', connection);
    return connection;
  }

  private onClose(connection: AmqpConnection, err?: Error): void {
    if (this.current !== connection) return;
    this.current = undefined;
    if (this.closing) return;
    this.log.warn('broker connection lost; reconnecting', { err: err?.message });
    this.emit('disconnected', err ?? new Error('connection closed'));
    void this.start().catch(() => undefined);
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
