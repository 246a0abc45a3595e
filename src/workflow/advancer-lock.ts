import type { Channel } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { Logger } from '../logging/logger.js';

/** How often a process that does not hold the lock tries to take it. */
export const LOCK_RETRY_MS = 2000;

/**
 * The workflow advancer's lock (docs/workflows.md, "What holds"): an exclusive queue, which the
 * broker lets one connection own at a time and deletes when that connection closes. Whoever
 * holds it publishes workflow steps; every other folder only reads. A process that dies (SIGKILL
 * included) releases it with its connection, and another takes it within LOCK_RETRY_MS.
 *
 * Why it fences: the steps are published in AMQP transactions on a channel of the same
 * connection. A holder whose connection is gone can commit nothing more, and the next holder
 * reads the stream up to a mark of its own before it acts, so it sees every commit of the last.
 *
 * Lifecycle: `start()` tries at once, then every LOCK_RETRY_MS until held; `onHeld` runs once it
 * is; `held` turns false when its channel or connection goes; `close()` stops trying and
 * releases it.
 */
export class AdvancerLock {
  private channel: Channel | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private refusedTold = false;

  constructor(
    private readonly connection: AmqpConnection,
    private readonly name: string,
    private readonly log: Logger,
    private readonly onHeld: () => void,
    private readonly retryMs = LOCK_RETRY_MS,
  ) {}

  get held(): boolean {
    return this.channel !== undefined;
  }

  start(): void {
    void this.attempt();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const channel = this.channel;
    this.channel = undefined;
    if (channel !== undefined) {
      await channel.deleteQueue(this.name).catch(() => undefined);
      await channel.close().catch(() => undefined);
    }
  }

  private async attempt(): Promise<void> {
    if (this.closed || this.channel !== undefined) return;
    let channel: Channel | undefined;
    try {
      channel = await this.connection.createChannel();
      channel.on('error', () => undefined);
      await channel.assertQueue(this.name, { exclusive: true, durable: false, autoDelete: false });
    } catch (err) {
      // Another connection holds it (RESOURCE_LOCKED closes the channel), or the connection went;
      // a user that may not declare it (ACCESS_REFUSED) never will: said once.
      if (!this.refusedTold && /ACCESS[-_]REFUSED/.test((err as Error).message)) {
        this.refusedTold = true;
        this.log.warn('workflow lock refused: this process lacks configure permission on it and will not advance workflows', {
          lock: this.name,
          err: (err as Error).message,
        });
      }
      await channel?.close().catch(() => undefined);
      this.retry();
      return;
    }
    if (this.closed) {
      await channel.deleteQueue(this.name).catch(() => undefined);
      await channel.close().catch(() => undefined);
      return;
    }
    this.channel = channel;
    channel.on('close', () => {
      if (this.channel !== channel) return;
      this.channel = undefined;
      if (!this.closed) this.log.warn('workflow lock lost with its channel: trying to take it again', { lock: this.name });
      this.retry();
    });
    this.log.info('workflow lock taken: this process advances workflows', { lock: this.name });
    this.onHeld();
  }

  private retry(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.attempt(), this.retryMs);
    this.timer.unref();
  }
}
