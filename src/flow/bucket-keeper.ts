import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { commit, selectTx } from '../broker/tx-channel.js';
import type { Logger } from '../logging/logger.js';
import { bucketQueues, type Bucket, type BucketQueues } from './bucket.js';

/** Consumer priority of a lowering keeper: returned tokens reach it before any stage's consumer. */
const LOWERING_PRIORITY = 100;

export interface BucketKeeperOptions {
  prefix: string;
  durable: boolean;
  log: Logger;
}

/** What `resize` did: tokens added (or none needed), another process is at it, or tokens are being withdrawn. */
export type ResizeOutcome = 'sized' | 'busy' | 'lowering';

/**
 * Keeps a bucket's tokens at its size, on the broker (docs/flow-control.md, "How limits are kept").
 *
 * The count of tokens that exist is the ready count of the bucket's ledger queue: one entry per
 * token, free, held or cooling down. Tokens are added with their entries, and withdrawn with
 * them, in one AMQP transaction each time: a process dying half-way changes nothing. Held tokens
 * are unacknowledged messages, which the broker gives back when their holder dies; so the ledger
 * is right whatever happens to the stages.
 *
 * Only one process resizes a bucket at a time: the one that declared its lock, an exclusive
 * queue the broker deletes with its connection. Raising publishes the missing tokens. Lowering
 * cannot take tokens from the jobs holding them: it consumes the bucket with a higher consumer
 * priority than the stages, so that every token given back or cooled down comes to it first,
 * and withdraws tokens until the count is the size, holding the lock meanwhile. So a lowered
 * limit starts no new job until fewer than the new limit run.
 *
 * Lifecycle: one per connection (`FlowControl`); `close()` ends lowerings (their tokens are
 * given back with the channel) before the connection closes.
 */
export class BucketKeeper {
  /** Buckets this process is resizing: one resize at a time per bucket, also within a process (the lock is per connection). */
  private readonly resizing = new Map<string, Promise<ResizeOutcome>>();
  private readonly lowerings = new Map<string, Lowering>();
  private closed = false;

  constructor(
    private readonly connection: AmqpConnection,
    private readonly options: BucketKeeperOptions,
  ) {}

  /** Declares the bucket's queues (idempotent): before anyone consumes its tokens. */
  async declare(bucket: Bucket): Promise<void> {
    const names = bucketQueues(this.options.prefix, bucket);
    const channel = await this.connection.createChannel();
    try {
      await declareQueues(channel, names, bucket, this.options.durable);
    } finally {
      await channel.close().catch(() => undefined);
    }
  }

  /** Brings the bucket to its size unless another process is at it (it will), see the class comment. */
  resize(bucket: Bucket): Promise<ResizeOutcome> {
    const pending = this.resizing.get(bucket.id);
    if (pending !== undefined) return pending.then(() => this.resize(bucket));
    // A lowering to this size goes on; one to another size is stopped first (resizeOnce).
    if (this.lowerings.get(bucket.id)?.target === bucket.size) return Promise.resolve('lowering');
    const resized = this.resizeOnce(bucket).finally(() => this.resizing.delete(bucket.id));
    this.resizing.set(bucket.id, resized);
    return resized;
  }

  /** Ends every lowering (what they hold goes back with their channels). */
  async close(): Promise<void> {
    this.closed = true;
    const ending = [...this.lowerings.values()].map((lowering) => lowering.stop());
    await Promise.all(ending);
  }

  private async resizeOnce(bucket: Bucket): Promise<ResizeOutcome> {
    if (this.closed) return 'busy';
    await this.lowerings.get(bucket.id)?.stop();
    const names = bucketQueues(this.options.prefix, bucket);
    const lock = await this.lock(names.lock);
    if (lock === undefined) return 'busy';
    let keepLock = false;
    try {
      const tx = await this.connection.createChannel();
      tx.on('error', () => undefined);
      await declareQueues(tx, names, bucket, this.options.durable);
      await selectTx(tx);
      const { messageCount: count } = await tx.checkQueue(names.ledger);
      if (count < bucket.size) {
        const token = Buffer.from(bucket.id);
        for (let i = count; i < bucket.size; i++) {
          tx.sendToQueue(names.tokens, token, { persistent: false });
          tx.sendToQueue(names.ledger, token, { persistent: false });
        }
        await commit(tx);
        this.options.log.debug('flow bucket raised', { bucket: bucket.id, from: count, to: bucket.size });
      }
      if (count <= bucket.size) {
        await tx.close().catch(() => undefined);
        return 'sized';
      }
      keepLock = true;
      const lowering = new Lowering(tx, names, bucket.size, count - bucket.size, this.options.log, bucket.id);
      this.lowerings.set(bucket.id, lowering);
      void lowering.done.finally(() => {
        if (this.lowerings.get(bucket.id) === lowering) this.lowerings.delete(bucket.id);
        void release(lock, names.lock);
      });
      await lowering.start();
      return 'lowering';
    } catch (err) {
      this.options.log.warn('flow bucket not resized', { bucket: bucket.id, err: (err as Error).message });
      return 'busy';
    } finally {
      if (!keepLock) await release(lock, names.lock);
    }
  }

  /** The bucket's lock on a channel of its own (a refusal closes the channel), or undefined when another connection has it. */
  private async lock(name: string): Promise<Channel | undefined> {
    const channel = await this.connection.createChannel();
    channel.on('error', () => undefined);
    try {
      await channel.assertQueue(name, { exclusive: true, durable: false, autoDelete: false });
      return channel;
    } catch {
      await channel.close().catch(() => undefined);
      return undefined;
    }
  }
}

async function release(lock: Channel, name: string): Promise<void> {
  await lock.deleteQueue(name).catch(() => undefined);
  await lock.close().catch(() => undefined);
}

async function declareQueues(channel: Channel, names: BucketQueues, bucket: Bucket, durable: boolean): Promise<void> {
  const cooling = names.cooldown;
  // A spent token (rejected) dead-letters into its cooldown queue, whose TTL sends it back.
  await channel.assertQueue(names.tokens, {
    durable,
    ...(cooling === undefined ? {} : { deadLetterExchange: '', deadLetterRoutingKey: cooling }),
  });
  await channel.assertQueue(names.ledger, { durable });
  if (cooling !== undefined) {
    await channel.assertQueue(cooling, {
      durable,
      messageTtl: bucket.cooldownMs,
      deadLetterExchange: '',
      deadLetterRoutingKey: names.tokens,
    });
  }
}

/**
 * Withdraws `excess` tokens as they come free, each with a ledger entry, in one transaction
 * each. Ends when all are withdrawn, the ledger runs out, `stop()` is called or its channel dies.
 */
class Lowering {
  readonly done: Promise<void>;
  private finish!: () => void;
  private tag: string | undefined;
  private chain: Promise<void> = Promise.resolve();
  private left: number;

  constructor(
    private readonly tx: Channel,
    private readonly names: BucketQueues,
    readonly target: number,
    excess: number,
    private readonly log: Logger,
    private readonly bucket: string,
  ) {
    this.left = excess;
    this.done = new Promise<void>((resolve) => (this.finish = resolve));
    tx.on('close', () => this.finish());
  }

  async start(): Promise<void> {
    this.log.info('flow limit lowered: withdrawing tokens as they come free', {
      bucket: this.bucket,
      withdraw: this.left,
      to: this.target,
    });
    await this.tx.prefetch(Math.min(this.left, 100));
    const { consumerTag } = await this.tx.consume(this.names.tokens, (message) => this.take(message), {
      noAck: false,
      priority: LOWERING_PRIORITY,
    });
    this.tag = consumerTag;
  }

  async stop(): Promise<void> {
    this.left = 0;
    await this.chain;
    await this.tx.close().catch(() => undefined);
    this.finish();
    await this.done;
  }

  private take(message: ConsumeMessage | null): void {
    if (message === null) return this.finish();
    this.chain = this.chain.then(() => this.withdraw(message)).catch(() => this.finish());
  }

  private async withdraw(token: ConsumeMessage): Promise<void> {
    const entry = this.left > 0 ? await this.tx.get(this.names.ledger, { noAck: false }) : false;
    if (entry === false) {
      this.tx.nack(token, false, true);
      await commit(this.tx);
      this.left = 0;
    } else {
      this.tx.ack(token);
      this.tx.ack(entry);
      await commit(this.tx);
      this.left--;
    }
    if (this.left > 0) return;
    if (this.tag !== undefined) await this.tx.cancel(this.tag).catch(() => undefined);
    this.log.info('flow limit lowered: tokens withdrawn', { bucket: this.bucket, to: this.target });
    await this.tx.close().catch(() => undefined);
    this.finish();
  }
}
