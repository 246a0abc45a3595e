import { expect } from 'chai';
import type { Options } from 'amqplib';
import type { PublishChannel } from '../../src/broker/confirm-publisher.js';
import { JobRouter } from '../../src/broker/job-router.js';
import { compileConfig } from '../../src/config/compile-config.js';
import { QueueFullError, QueueUnavailableError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import { JobContext } from '../../src/stage/job-context.js';
import { createLogger } from '../../src/logging/logger.js';
import { QueueFullReporter, type QueueFullSighting } from '../../src/events/queue-full-reporter.js';

/**
 * A confirm channel whose broker nacks every publish, as RabbitMQ does for a full
 * `reject-publish` queue and for a quorum queue without a leader alike, and that reads each
 * queue's ready messages from `depths` (absent: the broker does not answer).
 */
class NackingChannel implements PublishChannel {
  readonly read: string[] = [];
  constructor(private readonly depths: Record<string, number>) {}

  publish(exchange: string, routingKey: string, _content: Buffer, options: Options.Publish): Promise<void> {
    const headers = options.headers as Record<string, string>;
    return Promise.reject(
      new QueueFullError(exchange, routingKey, { queue: headers['x-ojs-queue'], tenant: headers['x-ojs-tenant'], headers }),
    );
  }

  readyMessages(queue: string): Promise<number | undefined> {
    this.read.push(queue);
    return Promise.resolve(this.depths[queue]);
  }
}

const config = compileConfig({
  prefix: 'p',
  tenants: ['acme'],
  queues: {
    bounded: { type: 'quorum', max_size: 100 },
    blocking: { type: 'quorum', max_size: 100, overflow_policy: 'block', block_timeout: 'PT0.2S' },
    bytes: { type: 'quorum', max_size_bytes: 1_000_000 },
    dropping: { type: 'quorum', max_size: 100, overflow_policy: 'drop_oldest' },
    open: { type: 'quorum' },
    classic: { max_size: 100 },
    classic_open: {},
  },
});
const job = (queue: string) => createJob({ type: 'doc', args: [] }, { queue, tenant: 'acme' });
const send = (channel: PublishChannel, queue: string): Promise<unknown> =>
  new JobRouter(config, channel).send(job(queue)).then(
    () => undefined,
    (err: unknown) => err,
  );

describe("a quorum queue's refused publish is checked before it is believed (a queue without a leader refuses too)", () => {
  it('a bounded queue below its max_size did not refuse for room: transient QueueUnavailableError, naming the queue and its depth', async () => {
    const channel = new NackingChannel({ 'p.queue.bounded.acme': 12 });
    const err = await send(channel, 'bounded');
    expect(err).to.be.instanceOf(QueueUnavailableError);
    expect(err).to.include({ transient: true, code: 'PUBLISH_FAILED', queue: 'p.queue.bounded.acme', tenant: 'acme' });
    expect((err as Error).message).to.equal(
      'queue "p.queue.bounded.acme" of tenant "acme" refused the job without being full (it holds 12 of its max_size 100 ready messages): a quorum queue without a leader, as during a failover; nothing was enqueued, try again',
    );
    expect(channel.read).to.deep.equal(['p.queue.bounded.acme']);
  });

  it('a bounded queue at its max_size refused for room: QUEUE_FULL stands, final', async () => {
    const err = await send(new NackingChannel({ 'p.queue.bounded.acme': 100 }), 'bounded');
    expect(err).to.be.instanceOf(QueueFullError).and.to.include({ transient: false, code: 'QUEUE_FULL' });
  });

  it('a bounded queue the broker cannot read has no leader either: transient', async () => {
    const err = await send(new NackingChannel({}), 'bounded');
    expect(err).to.be.instanceOf(QueueUnavailableError);
    expect((err as Error).message).to.contain('(its depth could not be read)');
  });

  it('a queue that never refuses for room (no max_size, drop_oldest) is not read: transient at once', async () => {
    for (const queue of ['open', 'dropping']) {
      const channel = new NackingChannel({});
      expect(await send(channel, queue), queue)
        .to.be.instanceOf(QueueUnavailableError)
        .and.to.have.property('transient', true);
      expect(channel.read, queue).to.deep.equal([]);
    }
  });

  it('a scheduled job refused by the delay ladder (due queues are unbounded): transient', async () => {
    const scheduled = createJob({ type: 'doc', args: [] }, { queue: 'bounded', tenant: 'acme' });
    scheduled.scheduled_at = new Date(Date.now() + 60_000).toISOString();
    const err = await new JobRouter(config, new NackingChannel({})).send(scheduled).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(QueueUnavailableError).and.to.have.property('queue', 'p.due.bounded.acme');
  });

  it('what cannot be told stays QUEUE_FULL: a queue bounded in bytes, a channel that cannot read queues', async () => {
    expect(await send(new NackingChannel({ 'p.queue.bytes.acme': 0 }), 'bytes')).to.be.instanceOf(QueueFullError);
    const nacking = new NackingChannel({});
    const blind: PublishChannel = { publish: (exchange, key, content, options) => nacking.publish(exchange, key, content, options) };
    expect(await send(blind, 'bounded'))
      .to.be.instanceOf(QueueFullError)
      .and.to.have.property('transient', false);
  });

  it('a classic queue has no leader to lose: its refusal stands, unread, whatever its bound', async () => {
    for (const queue of ['classic', 'classic_open']) {
      const channel = new NackingChannel({ [`p.queue.${queue}.acme`]: 0 });
      expect(await send(channel, queue), queue)
        .to.be.instanceOf(QueueFullError)
        .and.to.have.property('transient', false);
      expect(channel.read, queue).to.deep.equal([]);
    }
  });

  it('a block queue without a leader does not wait out block_timeout: transient at the first refusal', async () => {
    const started = Date.now();
    const err = await send(new NackingChannel({ 'p.queue.blocking.acme': 3 }), 'blocking');
    expect(err).to.be.instanceOf(QueueUnavailableError);
    expect(Date.now() - started).to.be.below(150);
  });

  it("a stage's settle() rejects with the transient error: its job is handed back, not failed (settlement.ts)", async () => {
    const parent = createJob({ type: 'in', args: [] }, { queue: 'in', tenant: 'acme' });
    const router = new JobRouter(config, new NackingChannel({ 'p.queue.bounded.acme': 0 }));
    const ctx = new JobContext('relay', ['bounded'], parent, {}, router, createLogger({}, 'error'), undefined);
    await ctx.emit('bounded', { type: 'doc', args: [] }).catch(() => undefined);
    const err = await ctx.settle().catch((e: unknown) => e);
    expect(err).to.be.instanceOf(QueueUnavailableError).and.to.have.property('transient', true);
  });

  it('queue.full and the capacity metrics leave out a refusal that cannot be for room, and keep the others', () => {
    const sightings: QueueFullSighting[] = [];
    const reporter = new QueueFullReporter(config, undefined, { onRefused: (sighting) => sightings.push(sighting) });
    for (const queue of ['open', 'dropping', 'bounded', 'classic_open']) {
      reporter.observe(new QueueFullError('p.root', queue, { queue, tenant: 'acme' }));
    }
    expect(sightings.map((sighting) => sighting.queue)).to.deep.equal(['bounded', 'classic_open']);
  });
});
