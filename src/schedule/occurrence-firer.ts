import type { Channel, Options } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { PublishChannel } from '../broker/confirm-publisher.js';
import { routeFor } from '../broker/job-router.js';
import { commit, rollback, selectTx } from '../broker/tx-channel.js';
import type { CompiledConfig } from '../config/config.types.js';
import { settingsFor } from '../config/queue-resolver.js';
import { toWire } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
import { childTraceparent } from '../job/trace-context.js';
import { stamp, type CreatedReport } from '../tracking-stream/tracking-report.js';
import { batchOf, publishRecord } from '../tracking-stream/tracking-stream.js';
import { BrokerNames } from '../topology/names.js';
import type { ScheduleRecord } from './schedule-records.js';
import { publishScheduleRecord } from './schedule-stream.js';

/** Transactions in flight at once on the leader's connection (each a job, its report, its record). */
export const FIRE_LANES = 32;

/** What became of a fire: committed, or refused by the broker (a full queue: the transaction was only partly carried out). */
export type FireOutcome = 'fired' | 'refused';

/**
 * Enqueues occurrences' jobs, each in one AMQP transaction (`tx.select`) with its `created`
 * report (when tracked or batched) and its `fired` record: the broker carries out all three or,
 * when the leader dies before the commit, none. A new leader therefore knows from the schedules
 * stream alone which occurrences were enqueued: that, and the derived job id, is what makes an
 * occurrence fire once (docs/schedules.md "What holds").
 *
 * The transactions run on the leader's own connection, the one holding the leadership queue:
 * once the broker has closed it (and only then can another process lead), nothing more of this
 * leader reaches the broker. A few lanes (channels) carry transactions at once: a commit waits
 * for the broker's disk, not for this process.
 */
export class OccurrenceFirer {
  private readonly lanes: Array<Promise<Lane> | undefined> = [];
  private next = 0;

  constructor(
    private readonly config: CompiledConfig,
    private readonly connection: AmqpConnection,
    private readonly laneCount = FIRE_LANES,
  ) {}

  /**
   * Sends the job, its report and its record in one transaction.
   * @returns `refused` when a queue refused the job (its `max_size` reached with `overflow_policy`
   *   `reject`): the record and the report went in without it (see the caller).
   * @throws when the connection is gone: the leadership with it.
   */
  async fire(job: Job, record: ScheduleRecord): Promise<FireOutcome> {
    const index = this.next++ % this.laneCount;
    const opening = (this.lanes[index] ??= this.open());
    try {
      const outcome = await (await opening).run((channel) => this.send(channel, job, record));
      // The refusal closed the channel: the next fire on this lane opens another.
      if (outcome === 'refused' && this.lanes[index] === opening) this.lanes[index] = undefined;
      return outcome;
    } catch (err) {
      if (this.lanes[index] === opening) this.lanes[index] = undefined;
      throw err;
    }
  }

  private async send(tx: PublishChannel, job: Job, record: ScheduleRecord): Promise<void> {
    // Routed before anything is sent: a job no route takes fails here, with nothing in the transaction.
    const message = toWire(job, { tenantHeader: this.config.tenantHeader, traceparent: childTraceparent() });
    const route = routeFor(this.config, job, { now: Date.now(), headers: message.options.headers ?? {} });
    const names = new BrokerNames(this.config.prefix);
    const batch = batchOf(job);
    if (batch !== undefined || settingsFor(this.config, job.queue, job.tenant).tracking !== false) {
      await publishRecord(
        tx,
        names.tracking,
        stamp<CreatedReport>({
          kind: 'created',
          job: job.id,
          ...(batch === undefined ? {} : { batch }),
          ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
          queue: job.queue,
          type: job.type,
        }),
      );
    }
    await tx.publish(route.exchange, route.routingKey, message.content, message.options);
    await publishScheduleRecord(tx, this.config, record);
  }

  private async open(): Promise<Lane> {
    const channel = await this.connection.createChannel();
    channel.on('error', () => undefined);
    await selectTx(channel);
    return new Lane(channel);
  }

  async close(): Promise<void> {
    for (const lane of this.lanes.splice(0)) await (await lane?.catch(() => undefined))?.close();
  }
}

/** One transaction channel: its transactions one after another. */
class Lane implements PublishChannel {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly channel: Channel) {}

  run(body: (channel: PublishChannel) => Promise<void>): Promise<FireOutcome> {
    const done = this.tail.then(async (): Promise<FireOutcome> => {
      try {
        await body(this);
      } catch (err) {
        // Whatever was buffered must not ride on the next commit.
        await rollback(this.channel);
        throw err;
      }
      try {
        await commit(this.channel);
        return 'fired';
      } catch (err) {
        // 406 PRECONDITION_FAILED "partial tx completion": a queue refused its message.
        if (/PRECONDITION_FAILED|partial tx/i.test((err as Error).message)) return 'refused';
        throw err;
      }
    });
    this.tail = done.catch(() => undefined);
    return done;
  }

  /** Buffered into the transaction; a full socket buffer is waited out (amqplib's false means "wait for drain"). */
  async publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish): Promise<void> {
    if (!this.channel.publish(exchange, routingKey, content, options)) {
      await new Promise<void>((resolve) => this.channel.once('drain', () => resolve()));
    }
  }

  async close(): Promise<void> {
    await this.channel.close().catch(() => undefined);
  }
}
