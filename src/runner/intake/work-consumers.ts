import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { Logger } from '../../logging/logger.js';
import { ChannelSupervisor, HEAL_DELAY_MS, MAX_HEAL_ATTEMPTS } from '../channels/channel-supervisor.js';
import { closeSource, ConsumerSource } from '../channels/consumer-source.js';
import type { Delivery } from '../channels/delivery.js';
import type { LinkMember, QueueProbe, SharedChannel, SharedLink } from '../channels/shared-channel.js';

export { closeSource } from '../channels/consumer-source.js';

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
  /**
   * Told what was in hand when the channel closed, and per queue how many more deliveries the
   * broker may have sent into it that never arrived (see LossLedger).
   */
  lost(messageIds: string[], unseen?: ReadonlyMap<string, number>, timedOut?: ConsumerSource['timedOut']): void;
  /** Told of every delivery as it arrives, in the broker's order (see LossLedger.arrived). */
  arrived(queue: string, message: ConsumeMessage): void;
  /**
   * Pooled: consume on this channel, shared with other tenants' runners, instead of one of its
   * own; queues are checked on the probe before each consume (a consume of a missing queue would
   * close the channel for every tenant).
   */
  shared?: { channel: SharedChannel; probe: QueueProbe };
}

/** The work channel: the `main` and `due` consumers, and the acknowledgements of their deliveries. */
interface WorkChannel {
  channel: Channel;
  source: ConsumerSource;
  consumers: Map<'main' | 'due', string>;
  /** Pooled: the shared generation it is a view of. */
  link?: SharedLink;
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
export class WorkConsumers implements LinkMember {
  readonly supervisor: ChannelSupervisor<WorkChannel>;
  /** Pooled: this runner's consumers on the shared channel's open generation. */
  private view: WorkChannel | undefined;
  private joined = false;
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
    return this.current?.consumers.size === 2;
  }

  /** The channel is up (its consumers may be off on purpose). */
  get open(): boolean {
    return this.current !== undefined;
  }

  private get current(): WorkChannel | undefined {
    if (this.options.shared === undefined) return this.supervisor.current;
    return this.view !== undefined && !this.view.source.closed ? this.view : undefined;
  }

  /** Pooled: the shared channel (attached by the pool) opened a generation. */
  linkOpened(link: SharedLink): void {
    this.view = { channel: link.channel, source: link.source, consumers: new Map(), link };
    void this.sync();
  }

  /** Pooled: a generation closed; what waits of it is the broker's again. */
  linkClosed(link: SharedLink): void {
    if (this.view?.link !== link) return;
    // Its ids were recorded by the shared channel; what may have been on the way is per consumer.
    this.options.lost([], this.unseen(this.view));
    this.view.consumers.clear();
    this.view = undefined;
    this.options.abandon(link.source);
  }

  async attach(connection: AmqpConnection): Promise<void> {
    this.connection = connection;
    clearTimeout(this.resubscribing);
    const shared = this.options.shared;
    if (shared === undefined) {
      await this.supervisor.attach(connection);
      return;
    }
    if (this.joined) {
      const link = shared.channel.current;
      if (link !== undefined && this.view?.link !== link) this.linkOpened(link);
      else await this.sync();
    } else {
      this.joined = true;
      shared.channel.join(this);
    }
    await this.syncing;
  }

  detach(): void {
    this.connection = undefined;
    clearTimeout(this.resubscribing);
    if (this.options.shared === undefined) this.supervisor.detach();
    else if (this.view?.link !== undefined) this.linkClosed(this.view.link);
  }

  async close(): Promise<void> {
    clearTimeout(this.resubscribing);
    const shared = this.options.shared;
    if (shared === undefined) {
      await this.supervisor.close();
      return;
    }
    // The channel stays for the other tenants: this runner's consumers go (stop cancelled them
    // already), and what it settled is sent.
    shared.channel.leave(this);
    const view = this.view;
    this.view = undefined;
    if (view === undefined) return;
    for (const tag of view.consumers.values()) await view.channel.cancel(tag).catch(() => undefined);
    view.consumers.clear();
    view.source.flush();
  }

  /**
   * Resolves once the broker has processed every acknowledgement sent on the work channel so far:
   * the gathered ones are flushed, then a harmless round trip (`basic.qos`) on the same channel,
   * whose reply comes after the broker handled what preceded it. A suspect about to run alone
   * waits for this: the broker's channels work independently, and an ack still queued on the work
   * channel when a suspect kills the process would be lost, its job run again.
   */
  async settled(): Promise<void> {
    const work = this.current;
    if (work === undefined) return;
    if (work.link !== undefined) {
      await work.link.settled();
      return;
    }
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
    const work = this.current;
    if (work === undefined) return;
    const wanted = this.options.wanted();
    for (const kind of ['main', 'due'] as const) {
      const tag = work.consumers.get(kind);
      if (wanted && tag === undefined) {
        const queue = this.options.queues[kind];
        const consumerTag = await this.consume(work, kind, queue);
        if (consumerTag === undefined) return;
        work.consumers.set(kind, consumerTag);
      } else if (!wanted && tag !== undefined) {
        work.consumers.delete(kind);
        await work.channel.cancel(tag).catch(() => undefined);
      }
    }
  }

  /** @returns the consumer tag, or undefined when the queue is missing (re-declared, then consumed, a second later). */
  private async consume(work: WorkChannel, kind: 'main' | 'due', queue: string): Promise<string | undefined> {
    const onMessage = (message: ConsumeMessage | null): void => this.onDelivery(work, kind, message);
    const link = work.link;
    if (link === undefined) return (await work.channel.consume(queue, onMessage, { noAck: false })).consumerTag;
    if ((await (this.options.shared as { probe: QueueProbe }).probe.messageCount(queue)) === undefined) {
      this.options.log.warn('queue missing; declaring it again before consuming', { queue });
      this.resubscribe();
      return undefined;
    }
    return link.consume(queue, this.options.prefetch, onMessage);
  }

  private async openChannel(connection: AmqpConnection, lost: (reason: string) => void, healing: boolean): Promise<WorkChannel> {
    if (healing) await this.options.declare(connection);
    const channel = await connection.createChannel();
    const work: WorkChannel = { channel, source: new ConsumerSource(channel), consumers: new Map() };
    channel.on('error', (err: Error) => {
      work.source.failed(err);
      this.options.log.error('work channel error', { queue: this.options.queues.main, err: err.message });
    });
    channel.on('close', () => {
      const expected = work.source.closed;
      const inHand = work.source.abandon();
      // Closed on purpose, its consumers were cancelled first: nothing was left on the way.
      this.options.lost(inHand, expected ? undefined : this.unseen(work), work.source.timedOut);
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
    this.options.arrived(queue, message);
    this.options.offer({ message, source: work.source, input: kind, queue, permit: undefined });
  }

  /**
   * Per queue consumed on a channel just lost, how many deliveries the broker may have sent that
   * never arrived: a consumer has at most `prefetch` out, and those in hand took their share.
   */
  private unseen(work: WorkChannel): Map<string, number> {
    const unseen = new Map<string, number>();
    for (const [kind, tag] of work.consumers) {
      unseen.set(this.options.queues[kind], Math.max(0, this.options.prefetch - work.source.inHandAtLoss(tag)));
    }
    return unseen;
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
