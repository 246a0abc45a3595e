import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { isOpen } from '../broker/connection-state.js';
import type { Logger } from '../logging/logger.js';
import { bucketQueues, type Bucket } from './bucket.js';
import { Line, settle, type Token, type TokenWait, type Waiter } from './token-line.js';

export type { Token, TokenWait } from './token-line.js';

/**
 * A concurrency token freed while a job of this process waits for it goes to that job directly,
 * without a round trip to the broker, unless it has been in this process this long (ms) and
 * other processes wait for the bucket: then it goes back, and the broker hands it to the next
 * process in turn. Fairness between processes costs a round trip per token and quantum, not per
 * job, and nothing while tokens are free (the bucket's queue has some ready).
 */
const REUSE_QUANTUM_MS = 1000;

/**
 * A token this process has no job for (one came as a job stopped waiting, or a job ended with
 * nobody waiting) stays this long as a spare, ms, for the next job that asks, then goes back;
 * the bucket's consumer is cancelled once nobody waited for that long. Without it, a busy
 * process would cancel and start a consumer, and send tokens back and forth, many times a second.
 */
const SPARE_MS = 100;

/** Wait before re-opening a token channel the broker closed on a live connection, ms. */
const REOPEN_DELAY_MS = 1000;

/** Most tokens one consumer of a bucket may be sent ahead: the jobs waiting for it, up to this. */
const MAX_TOKEN_PREFETCH = 100;

/** Told of every token granted (FlowWatch: metrics and `rate_limit.*` events). */
export type GrantObserver = (bucket: Bucket, waitedMs: number, stillWaiting: number) => void;

/** One bucket as this process sees it now. */
export interface BucketSample {
  bucket: Bucket;
  /** Jobs of this process waiting for one of its tokens. */
  waiting: number;
  /** Its tokens in this process's hands (concurrency: jobs running with it). */
  held: number;
}

/**
 * The tokens this process takes from the broker (docs/flow-control.md). A bucket is consumed only
 * while jobs of this process wait for it: one consumer per bucket, sent ahead as many tokens as
 * jobs wait (its prefetch), which grants them in arrival order. A token nobody waits for any more
 * goes straight back (nack, requeue).
 *
 * Every token is an unacknowledged message on this process's token channel: when the process or
 * its connection dies, the broker gives them all back. So is a token of a job that outlives its
 * channel: its release is then a no-op.
 *
 * The broker may close the token channel while the connection lives (a token held past its
 * `consumer_timeout` by a long job): the channel is re-opened on the same connection a second
 * later, and its waiters are served there. Until then `open` is false (`/readyz` says so).
 *
 * Lifecycle: `attach()` on every connection, `detach()` when it is gone (waiters stay and are
 * served on the next one), `close()` at stop.
 */
export class TokenSource {
  private channel: Channel | undefined;
  /** The connection attached last, while it lives and the source is not closed. */
  private connection: AmqpConnection | undefined;
  private reopening: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly lines = new Map<string, Line>();
  /** Consumer starts one after another: the channel's prefetch applies to the next consumer started. */
  private starting: Promise<unknown> = Promise.resolve();
  /** Partitions held until a time (epoch ms): a handler met their limit downstream (`hold`). */
  private readonly holds = new Map<string, number>();
  private contention: NodeJS.Timeout | undefined;

  constructor(
    private readonly prefix: string,
    private readonly log: Logger,
    /** Declares and sizes a bucket before it is first consumed (FlowControl). */
    private readonly ready: (bucket: Bucket) => Promise<void>,
    private readonly observe: GrantObserver = () => undefined,
  ) {}

  /** False while attached to a connection whose token channel is down (being re-opened). */
  get open(): boolean {
    return this.connection === undefined || this.channel !== undefined;
  }

  async attach(connection: AmqpConnection): Promise<void> {
    clearTimeout(this.reopening);
    this.connection = connection;
    const channel = await connection.createChannel();
    channel.on('error', (err: Error) => this.log.warn('flow token channel error', { err: err.message }));
    channel.on('close', () => {
      if (this.channel !== channel) return;
      this.forget();
      this.reopenLater(connection);
    });
    if (this.closed || this.connection !== connection) {
      await channel.close().catch(() => undefined);
      return;
    }
    this.channel = channel;
    for (const line of this.lines.values()) {
      // Declared (and sized) again on every connection: a broker that restarted may not have them.
      line.declared = this.ready(line.bucket);
      this.pump(line);
    }
  }

  /** The connection is gone, and the tokens with it: lines consume again on the next attach. */
  detach(): void {
    clearTimeout(this.reopening);
    this.connection = undefined;
    this.forget();
  }

  /**
   * The channel closed while its connection lives: opened again on it a second later (again
   * and again while it fails: a token channel has nothing to declare that could keep failing).
   */
  private reopenLater(connection: AmqpConnection): void {
    clearTimeout(this.reopening);
    this.reopening = setTimeout(() => {
      if (this.closed || this.connection !== connection || !isOpen(connection)) return;
      this.log.warn('flow token channel closed by the broker; re-opening it');
      this.attach(connection).catch((err: Error) => {
        this.log.warn('flow token channel not re-opened; retrying', { err: err.message });
        if (this.connection === connection) this.reopenLater(connection);
      });
    }, REOPEN_DELAY_MS);
    this.reopening.unref();
  }

  /** The channel is gone, and the tokens with it. */
  private forget(): void {
    this.channel = undefined;
    for (const line of this.lines.values()) {
      line.reset();
      line.held = 0;
      line.spares.length = 0;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reopening);
    this.connection = undefined;
    clearInterval(this.contention);
    const channel = this.channel;
    this.channel = undefined;
    this.lines.clear();
    await channel?.close().catch(() => undefined);
  }

  /** Waits for a token of `bucket`; `grant` is called once, unless the wait is cancelled first. */
  take(bucket: Bucket, grant: (token: Token) => void): TokenWait {
    const line = this.line(bucket);
    const waiter: Waiter = { grant, cancelled: false, asked: performance.now() };
    line.waiters.push(waiter);
    // A spare goes to it at once (granted before this returns).
    while (line.spares.length > 0 && line.waiters.length > 0 && this.grant(line, line.spares[0])) line.spares.shift();
    this.pump(line);
    return {
      cancel: () => {
        if (waiter.cancelled) return;
        waiter.cancelled = true;
        line.forget(waiter);
        this.pump(line);
      },
    };
  }

  /**
   * A job ends: its concurrency token goes to the next job waiting here, or stays a spare for a
   * moment, or goes back to the broker once this process has had it for REUSE_QUANTUM_MS while
   * other processes wait for the bucket.
   */
  release(token: Token): void {
    this.returned(token);
    const line = this.lines.get(token.bucket.id);
    if (line === undefined) return settle(() => token.channel.nack(token.message, false, true));
    const reuse = !line.contended || performance.now() - token.since < REUSE_QUANTUM_MS;
    if (reuse && (this.grant(line, token) || this.spare(line, token))) return;
    settle(() => token.channel.nack(token.message, false, true));
  }

  /** A job starts: its rate or throttle token cools down (rejected: dead-lettered to its cooldown queue). */
  spend(token: Token): void {
    this.returned(token);
    settle(() => token.channel.reject(token.message, false));
  }

  /** An unused token, or a job's that ends: back to the broker, for whoever is next. */
  giveBack(token: Token): void {
    this.returned(token);
    settle(() => token.channel.nack(token.message, false, true));
  }

  /**
   * Grants no token of these partitions until `until` (epoch ms): a handler was told "too many
   * requests" downstream (RateLimitedError). Jobs waiting for them wait on; their consumers stop
   * and start again then. A later hold of a partition extends it, an earlier one does not shorten it.
   */
  hold(partitions: readonly string[], until: number): void {
    for (const partition of partitions) this.holds.set(partition, Math.max(until, this.holds.get(partition) ?? 0));
    const timer = setTimeout(
      () => {
        for (const partition of partitions) if ((this.holds.get(partition) ?? 0) <= Date.now()) this.holds.delete(partition);
        for (const line of this.lines.values()) this.pump(line);
      },
      Math.max(0, until - Date.now()) + 5,
    );
    timer.unref();
    for (const line of this.lines.values()) if (partitions.includes(line.bucket.partition)) this.pump(line);
  }

  /** Every bucket this process has used, with its waiting jobs and held tokens. */
  samples(): BucketSample[] {
    return [...this.lines.values()].map((line) => ({ bucket: line.bucket, waiting: line.waiters.length, held: line.held }));
  }

  /** Keeps a token no job here needs now for the next that asks (see SPARE_MS); false when its partition is held. */
  private spare(line: Line, token: Token): boolean {
    if (this.heldBack(line) || token.channel !== this.channel) return false;
    token.spareSince = performance.now();
    line.spares.push(token);
    this.sweepLater(line);
    return true;
  }

  /**
   * SPARE_MS after the line last had a spare or a waiter: spares go back, and a consumer nobody
   * waits for is cancelled.
   */
  private sweepLater(line: Line): void {
    if (line.sweep !== undefined) return;
    line.sweep = setTimeout(() => {
      line.sweep = undefined;
      const now = performance.now();
      while (line.spares.length > 0 && now - (line.spares[0].spareSince ?? now) >= SPARE_MS) {
        const token = line.spares.shift() as Token;
        settle(() => token.channel.nack(token.message, false, true));
      }
      if (line.spares.length > 0 || line.waiters.length > 0) this.sweepLater(line);
      this.pump(line);
    }, SPARE_MS);
    line.sweep.unref();
  }

  private returned(token: Token): void {
    const line = this.lines.get(token.bucket.id);
    if (line !== undefined && line.held > 0) line.held--;
  }

  private heldBack(line: Line): boolean {
    const until = this.holds.get(line.bucket.partition);
    return until !== undefined && until > Date.now();
  }

  /** Grants the token to the line's first waiter; false when none waits or the partition is held. */
  private grant(line: Line, token: Token): boolean {
    if (this.heldBack(line)) return false;
    const waiter = line.waiters.shift();
    if (waiter === undefined) return false;
    line.held++;
    this.observe(line.bucket, performance.now() - waiter.asked, line.waiters.length);
    waiter.grant(token);
    return true;
  }

  private line(bucket: Bucket): Line {
    let line = this.lines.get(bucket.id);
    if (line === undefined) this.lines.set(bucket.id, (line = new Line(bucket, this.ready(bucket))));
    this.watchContention();
    return line;
  }

  /**
   * Every quantum, for each bucket whose tokens this process holds: whether other processes
   * wait for it (no token ready, and consumers besides this process's). Until it is known, it is
   * taken as contended.
   */
  private watchContention(): void {
    if (this.contention !== undefined) return;
    this.contention = setInterval(() => {
      const channel = this.channel;
      if (channel === undefined) return;
      for (const line of this.lines.values()) {
        if (line.held === 0 && line.spares.length === 0) continue;
        void channel
          .checkQueue(bucketQueues(this.prefix, line.bucket).tokens)
          .then(({ messageCount, consumerCount }) => {
            line.contended = messageCount === 0 && consumerCount > (line.state === 'consuming' ? 1 : 0);
          })
          .catch(() => undefined);
      }
    }, REUSE_QUANTUM_MS);
    this.contention.unref();
  }

  /**
   * Consumes while jobs wait and stops when none do. A consumer sent as many tokens as it was
   * allowed, with jobs still waiting, is replaced by one allowed as many as wait now.
   */
  private pump(line: Line): void {
    const channel = this.channel;
    if (channel === undefined) return;
    const wanted = line.waiters.length > 0 && !this.heldBack(line);
    if (wanted) line.lastWanted = performance.now();
    if (wanted && line.state === 'idle') {
      line.state = 'starting';
      const allowance = Math.min(line.waiters.length, MAX_TOKEN_PREFETCH);
      this.starting = this.starting
        .then(async () => {
          await line.declared;
          await channel.prefetch(allowance);
          const queue = bucketQueues(this.prefix, line.bucket).tokens;
          // Counted from before the consume: the broker may send the first tokens in the same read
          // as its consume-ok, and they are received before `consume` resumes here.
          line.allowance = allowance;
          const { consumerTag } = await channel.consume(queue, (message) => this.received(line, channel, message), { noAck: false });
          line.consuming(consumerTag);
          this.pump(line);
        })
        .catch((err: Error) => {
          this.log.warn('flow tokens not consumed', { bucket: line.bucket.id, err: err.message });
          line.reset();
        });
      return;
    }
    if (!wanted && line.state === 'consuming') {
      // The consumer goes once nobody has waited for SPARE_MS and no spare is left.
      if (line.spares.length === 0 && performance.now() - line.lastWanted >= SPARE_MS) this.cancel(line, channel);
      else this.sweepLater(line);
      return;
    }
    if (line.state === 'consuming' && line.allowance === 0) {
      this.cancel(line, channel);
    }
  }

  private cancel(line: Line, channel: Channel): void {
    const tag = line.tag as string;
    line.state = 'cancelling';
    void channel
      .cancel(tag)
      .catch(() => undefined)
      .finally(() => {
        if (line.tag !== tag) return;
        line.state = 'idle';
        line.tag = undefined;
        this.pump(line);
      });
  }

  private received(line: Line, channel: Channel, message: ConsumeMessage | null): void {
    if (message === null) {
      // The broker cancelled the consumer (its queue was deleted): consume again when needed.
      line.reset();
      return;
    }
    if (line.allowance > 0) line.allowance--;
    const token: Token = { bucket: line.bucket, message, channel, since: performance.now() };
    if (!this.grant(line, token) && !this.spare(line, token)) settle(() => channel.nack(message, false, true));
    this.pump(line);
  }
}
