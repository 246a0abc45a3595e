import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { Logger } from '../logging/logger.js';
import { ChannelSupervisor, HEAL_DELAY_MS, MAX_HEAL_ATTEMPTS } from './channel-supervisor.js';
import { ConsumerSource } from './consumer-source.js';
import type { Delivery } from './delivery.js';

export interface WorkConsumersOptions {
  /** The physical queues consumed: the main queue and its `due` companion. */
  queues: { main: string; due: string };
  /** Deliveries the broker may send ahead, per consumer. */
  prefetch: number;
  /** Declares (or, with broker-enforced tenants, checks) the topology again before healing: a deleted queue comes back. */
  declare(connection: AmqpConnection): Promise<void>;
  log: Logger;
  /** Whether consumers should be on now (running, not suspended). */
  wanted(): boolean;
  /** Every delivery goes here. */
  offer(delivery: Delivery): void;
  /** The channel's waiting deliveries are the broker's again: forget them. */
  abandon(source: ConsumerSource): void;
  onFatal(err: Error): void;
  /** Told what was in hand when the channel closed (see LossLedger). */
  lost(messageIds: string[]): void;
}

/** The work channel: the `main` and `due` consumers, and the acknowledgements of their deliveries. */
interface WorkChannel {
  channel: Channel;
  source: ConsumerSource;
  consumers: Map<'main' | 'due', string>;
}

/**
 * A runner's two work consumers on one channel (one prefetch each), kept in line with what the
 * runner wants: `sync()` starts or cancels them, one call at a time, and whoever changes what is
 * wanted (pause, resume, a suspect to isolate, a healed channel) calls it.
 *
 * Healing, each on its own: the channel, by its supervisor (declared again, re-opened, synced);
 * a consumer the broker cancels (its queue was deleted), by declaring again and re-subscribing
 * it a second later, while the other consumer and the jobs in flight carry on. Either gives up
 * after MAX_HEAL_ATTEMPTS failures in a row on a live connection (`onFatal`).
 */
export class WorkConsumers {
  readonly supervisor: ChannelSupervisor<WorkChannel>;
  private connection: AmqpConnection | undefined;
  private syncing: Promise<void> = Promise.resolve();
  private resubscribing: NodeJS.Timeout | undefined;
  private resubscribeFailures = 0;

  constructor(private readonly options: WorkConsumersOptions) {
    this.supervisor = new ChannelSupervisor<WorkChannel>({
      name: 'work',
      log: options.log,
      onFatal: options.onFatal,
      isOpen: (work) => !work.source.closed,
      open: (connection, lost, healing) => this.openChannel(connection, lost, healing),
      close: (work) => closeSource(work.source),
      onOpen: () => void this.sync(),
    });
  }

  /** Both consumers on. */
  get consuming(): boolean {
    return this.supervisor.current?.consumers.size === 2;
  }

  /** The channel is up (its consumers may be off on purpose). */
  get open(): boolean {
    return this.supervisor.current !== undefined;
  }

  async attach(connection: AmqpConnection): Promise<void> {
    this.connection = connection;
    clearTimeout(this.resubscribing);
    await this.supervisor.attach(connection);
  }

  detach(): void {
    this.connection = undefined;
    clearTimeout(this.resubscribing);
    this.supervisor.detach();
  }

  async close(): Promise<void> {
    clearTimeout(this.resubscribing);
    await this.supervisor.close();
  }

  /**
   * Resolves once the broker has processed every acknowledgement sent on the work channel so far:
   * the gathered ones are flushed, then a harmless round trip (`basic.qos`) on the same channel,
   * whose reply comes after the broker handled what preceded it. A suspect about to run alone
   * waits for this: the broker's channels work independently, and an ack still queued on the work
   * channel when a suspect kills the process would be lost, its job run again.
   */
  async settled(): Promise<void> {
    const work = this.supervisor.current;
    if (work === undefined) return;
    work.source.flush();
    await work.channel.prefetch(this.options.prefetch).catch(() => undefined);
  }

  /** Brings the consumers in line with `wanted()`; one call at a time. */
  sync(): Promise<void> {
    this.syncing = this.syncing
      .then(() => this.reconcile())
      .catch((err: unknown) => {
        // The channel closed under us (a deleted queue): its supervisor heals it and syncs again.
        this.options.log.warn('could not update the consumers', { queue: this.options.queues.main, err: (err as Error).message });
      });
    return this.syncing;
  }

  private async reconcile(): Promise<void> {
    const work = this.supervisor.current;
    if (work === undefined) return;
    const wanted = this.options.wanted();
    for (const kind of ['main', 'due'] as const) {
      const tag = work.consumers.get(kind);
      if (wanted && tag === undefined) {
        const queue = this.options.queues[kind];
        const { consumerTag } = await work.channel.consume(queue, (message) => this.onDelivery(work, kind, message), { noAck: false });
        work.consumers.set(kind, consumerTag);
      } else if (!wanted && tag !== undefined) {
        work.consumers.delete(kind);
        await work.channel.cancel(tag).catch(() => undefined);
      }
    }
  }

  private async openChannel(connection: AmqpConnection, lost: (reason: string) => void, healing: boolean): Promise<WorkChannel> {
    if (healing) await this.options.declare(connection);
    const channel = await connection.createChannel();
    const work: WorkChannel = { channel, source: new ConsumerSource(channel), consumers: new Map() };
    channel.on('error', (err: Error) =>
      this.options.log.error('work channel error', { queue: this.options.queues.main, err: err.message }),
    );
    channel.on('close', () => {
      const expected = work.source.closed;
      this.options.lost(work.source.abandon());
      work.consumers.clear();
      this.options.abandon(work.source);
      if (!expected) lost('work channel closed');
    });
    // Consume and publish on separate channels: a consumer's flow never waits on confirms.
    await channel.prefetch(this.options.prefetch);
    return work;
  }

  private onDelivery(work: WorkChannel, kind: 'main' | 'due', message: ConsumeMessage | null): void {
    const queue = this.options.queues[kind];
    if (message === null) {
      // The broker cancelled this consumer (its queue was deleted): the other consumer and the
      // jobs in flight carry on; this one is declared again and resumed.
      work.consumers.delete(kind);
      this.options.log.warn('consumer cancelled by the broker', { queue });
      this.resubscribe();
      return;
    }
    work.source.delivered(message);
    this.options.offer({ message, source: work.source, input: kind, queue });
  }

  /** Re-declares the topology and consumes again, a second later, giving up after a few tries. */
  private resubscribe(): void {
    clearTimeout(this.resubscribing);
    this.resubscribing = setTimeout(() => {
      const connection = this.connection;
      if (connection === undefined) return;
      this.options
        .declare(connection)
        .then(() => this.sync())
        .then(
          () => (this.resubscribeFailures = 0),
          (err: Error) => {
            if (++this.resubscribeFailures >= MAX_HEAL_ATTEMPTS) {
              this.options.log.error('re-subscribing keeps failing; giving up', { queue: this.options.queues.main, err: err.message });
              this.options.onFatal(err);
              return;
            }
            this.options.log.error('re-subscribing failed; retrying', { queue: this.options.queues.main, err: err.message });
            this.resubscribe();
          },
        );
    }, HEAL_DELAY_MS);
  }
}

/** Sends the acknowledgements gathered so far, then closes the channel on purpose. */
export async function closeSource(source: ConsumerSource): Promise<void> {
  source.flush();
  source.closed = true;
  await source.channel.close().catch(() => undefined);
}
