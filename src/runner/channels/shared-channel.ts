import type { Channel } from 'amqplib';
import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { Logger } from '../../logging/logger.js';
import { ChannelSupervisor } from './channel-supervisor.js';
import { closeSource, ConsumerSource } from './consumer-source.js';

/**
 * One open generation of a shared channel: the channel, the source its deliveries are settled on,
 * and the prefetch its next consumer gets.
 */
export class SharedLink {
  readonly source: ConsumerSource;
  /** The `basic.qos` last set on the channel: it applies to the consumers started after it. */
  prefetch: number | undefined;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(readonly channel: Channel) {
    this.source = new ConsumerSource(channel);
  }

  /**
   * Runs `fn` with nothing else of this link's callers in between: a `basic.qos` and the
   * `basic.consume` it is meant for must not be split by another member's.
   */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Starts a consumer of `queue` with `prefetch` deliveries in hand at most. */
  consume(queue: string, prefetch: number, onMessage: Parameters<Channel['consume']>[1]): Promise<string> {
    return this.exclusive(async () => {
      if (this.prefetch !== prefetch) {
        await this.channel.prefetch(prefetch);
        this.prefetch = prefetch;
      }
      const { consumerTag } = await this.channel.consume(queue, onMessage, { noAck: false });
      return consumerTag;
    });
  }

  /**
   * Resolves once the broker has processed everything sent on the channel so far: acks gathered
   * are flushed, then a harmless round trip (the same `basic.qos` again).
   */
  async settled(): Promise<void> {
    this.source.flush();
    await this.exclusive(() => this.channel.prefetch(this.prefetch ?? 0)).catch(() => undefined);
  }
}

/** A member of a shared channel: told when a generation opens and when it closes. */
export interface LinkMember {
  linkOpened(link: SharedLink): void;
  linkClosed(link: SharedLink): void;
}

export interface SharedChannelOptions {
  /** For log lines: `work-3`, `suspect`. */
  name: string;
  log: Logger;
  onFatal(err: Error): void;
  /** Told what was in hand when a generation closed (see LossLedger). */
  lost(messageIds: string[], timedOut?: ConsumerSource['timedOut']): void;
}

/**
 * One channel that the runners of a pooled process share (their consumers, or their suspect
 * `basic.get`s), where a single-tenant runner has channels of its own: 1,000 tenants with three
 * channels each would pass the 2,047 channels a connection may have, and cost the broker a
 * process per channel.
 *
 * Healed by its {@link ChannelSupervisor} when it closes on a live connection; every member is
 * told of each generation that opens and closes, and re-subscribes what it wants on the next.
 * A member must not do on it what the broker answers with a channel error (a consume or passive
 * declare of a queue that may be missing): that would close it for every member. Checks go to a
 * {@link QueueProbe} instead.
 */
export class SharedChannel {
  readonly supervisor: ChannelSupervisor<SharedLink>;
  private readonly members = new Set<LinkMember>();

  constructor(private readonly options: SharedChannelOptions) {
    this.supervisor = new ChannelSupervisor<SharedLink>({
      name: options.name,
      log: options.log,
      onFatal: options.onFatal,
      isOpen: (link) => !link.source.closed,
      open: (connection, lost) => this.openLink(connection, lost),
      close: (link) => closeSource(link.source),
      onOpen: (link) => {
        for (const member of [...this.members]) member.linkOpened(link);
      },
    });
  }

  get current(): SharedLink | undefined {
    return this.supervisor.current;
  }

  get size(): number {
    return this.members.size;
  }

  /** A member joins; told at once of the open generation, if any. */
  join(member: LinkMember): void {
    this.members.add(member);
    const link = this.current;
    if (link !== undefined) member.linkOpened(link);
  }

  leave(member: LinkMember): void {
    this.members.delete(member);
  }

  attach(connection: AmqpConnection): Promise<SharedLink> {
    return this.supervisor.attach(connection);
  }

  detach(): void {
    this.supervisor.detach();
  }

  close(): Promise<void> {
    return this.supervisor.close();
  }

  private async openLink(connection: AmqpConnection, lost: (reason: string) => void): Promise<SharedLink> {
    const channel = await connection.createChannel();
    const link = new SharedLink(channel);
    channel.on('error', (err: Error) => {
      link.source.failed(err);
      this.options.log.error('shared channel error', { channel: this.options.name, err: err.message });
    });
    channel.on('close', () => {
      const expected = link.source.closed;
      this.options.lost(link.source.abandon(), link.source.timedOut);
      for (const member of [...this.members]) member.linkClosed(link);
      if (!expected) lost('shared channel closed');
    });
    return link;
  }
}

/**
 * Channels a {@link QueueProbe} asks on at once. A pooled process probes every tenant's queues
 * before consuming them (three per tenant at start): one channel answers one question at a time,
 * and 30,000 questions in a row were a good part of starting 10,000 tenants.
 */
export const PROBE_LANES = 8;

/**
 * Channels a {@link QueueProbe} asks about queues that may well be missing on (`mayBeMissing`:
 * the suspect queues a pooled process following the broker declares on first use, most of which
 * never exist). Each asks one question at a time, so that a 404, which closes its channel, fails
 * no other question.
 */
export const UNCERTAIN_LANES = 4;

/** How a question is asked. */
export interface ProbeQuestion {
  /**
   * The queue is not known to exist: asked on a lane of its own (UNCERTAIN_LANES), so that its
   * 404 never fails a question about a queue that exists. @defaultValue false
   */
  mayBeMissing?: boolean;
}

/**
 * Passive declares of queues on channels of their own, for the members of shared channels: the
 * broker's 404 for a missing queue closes that probe channel (the next question on its lane
 * opens another), not the channel every tenant consumes on. Questions go to PROBE_LANES channels
 * in turn: their answers are independent of one another. amqplib sends the questions of one
 * channel one after another, and a 404 fails every question still waiting on that channel: so
 * questions about queues that may be missing go to UNCERTAIN_LANES channels of their own, one
 * at a time on each, and the lanes for queues expected to exist do not churn.
 */
export class QueueProbe {
  /** PROBE_LANES lanes, then the uncertain ones. */
  private readonly lanes: Array<Promise<Channel> | undefined> = [];
  /** Per uncertain lane, the question last asked: the next waits for it. */
  private readonly turns: Array<Promise<unknown>> = [];
  private next = 0;
  private nextUncertain = 0;
  private connection: AmqpConnection | undefined;

  constructor(
    private readonly width = PROBE_LANES,
    private readonly uncertainWidth = UNCERTAIN_LANES,
  ) {}

  attach(connection: AmqpConnection): void {
    this.connection = connection;
    this.lanes.length = 0;
    this.turns.length = 0;
  }

  /** Ready messages in `queue`; undefined when the queue does not exist. Throws when the connection is gone. */
  messageCount(queue: string, question: ProbeQuestion = {}): Promise<number | undefined> {
    if (question.mayBeMissing === true) {
      const turn = this.nextUncertain;
      this.nextUncertain = (this.nextUncertain + 1) % this.uncertainWidth;
      const asked = (this.turns[turn] ?? Promise.resolve()).then(() => this.ask(this.width + turn, queue));
      this.turns[turn] = asked.catch(() => undefined);
      return asked;
    }
    const lane = this.next;
    this.next = (this.next + 1) % this.width;
    return this.ask(lane, queue);
  }

  async close(): Promise<void> {
    const lanes = [...this.lanes];
    this.lanes.length = 0;
    this.turns.length = 0;
    this.connection = undefined;
    await Promise.all(lanes.map((channel) => channel?.then((open) => open.close()).catch(() => undefined)));
  }

  private async ask(lane: number, queue: string): Promise<number | undefined> {
    const channel = await this.open(lane);
    try {
      return (await channel.checkQueue(queue)).messageCount;
    } catch (err) {
      if ((err as { code?: unknown }).code === 404) {
        this.lanes[lane] = undefined;
        return undefined;
      }
      throw err;
    }
  }

  private open(lane: number): Promise<Channel> {
    const open = this.lanes[lane];
    if (open !== undefined) return open;
    const connection = this.connection;
    if (connection === undefined) return Promise.reject(new Error('queue probe has no connection'));
    const opening = connection.createChannel().then((channel) => {
      // The 404 arrives as the rejection of the check; the event must not crash.
      channel.on('error', () => undefined);
      channel.on('close', () => {
        if (this.lanes[lane] === opening) this.lanes[lane] = undefined;
      });
      return channel;
    });
    this.lanes[lane] = opening;
    opening.catch(() => {
      if (this.lanes[lane] === opening) this.lanes[lane] = undefined;
    });
    return opening;
  }
}
