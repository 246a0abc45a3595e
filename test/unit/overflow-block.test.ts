import { expect } from 'chai';
import type { Options } from 'amqplib';
import type { PublishChannel } from '../../src/broker/confirm-publisher.js';
import { JobRouter } from '../../src/broker/job-router.js';
import { blockTimeoutOf } from '../../src/broker/overflow-block.js';
import { compileConfig } from '../../src/config/compile-config.js';
import { PublishError, QueueFullError } from '../../src/errors/errors.js';
import { createJob } from '../../src/job/envelope.js';
import { QueueFullReporter, type QueueFullSighting } from '../../src/events/queue-full-reporter.js';
import { JobContext } from '../../src/stage/job-context.js';
import { createLogger } from '../../src/logging/logger.js';

/** A confirm channel whose queue is full for the first `refusals` publishes (nacked as the broker does), then takes them. */
class FullThenFree implements PublishChannel {
  tries = 0;
  constructor(
    private refusals: number,
    private readonly other?: Error,
  ) {}

  publish(exchange: string, routingKey: string, _content: Buffer, options: Options.Publish): Promise<void> {
    this.tries++;
    if (this.other !== undefined && this.tries === 2) return Promise.reject(this.other);
    if (this.refusals-- > 0) {
      const headers = options.headers as Record<string, string>;
      return Promise.reject(new QueueFullError(exchange, routingKey, { queue: headers['x-ojs-queue'], tenant: headers['x-ojs-tenant'] }));
    }
    return Promise.resolve();
  }
}

const config = compileConfig({
  tenants: ['acme', { name: 'globex', queues: { out: { block_timeout: 'PT0.3S' } } }],
  queues: {
    out: { max_size: 5, overflow_policy: 'block' },
    strict: { max_size: 5 },
    pooled: { scope: 'shared', max_size: 5, overflow_policy: 'block', block_timeout: 'PT2S' },
  },
});
const job = (tenant = 'globex', queue = 'out') => createJob({ type: 'doc', args: [] }, { queue, tenant });

describe('overflow_policy block', () => {
  it('resolves block_timeout per queue and tenant (PT30S by default), and none for a queue that rejects', () => {
    expect(blockTimeoutOf(config, 'out', 'acme')).to.deep.equal({ text: 'PT30S', ms: 30_000 });
    expect(blockTimeoutOf(config, 'out', 'globex')).to.deep.equal({ text: 'PT0.3S', ms: 300 });
    expect(blockTimeoutOf(config, 'pooled', 'globex')).to.deep.equal({ text: 'PT2S', ms: 2000 });
    expect(blockTimeoutOf(config, 'strict', 'acme')).to.equal(undefined);
  });

  it('tries a refused publish again until the queue takes it: no failure, however many refusals', async () => {
    const channel = new FullThenFree(3);
    await new JobRouter(config, channel).send(job());
    expect(channel.tries).to.equal(4);
  });

  it('fails with QUEUE_FULL once block_timeout passed, naming the queue, the timeout and the wait', async () => {
    const channel = new FullThenFree(Number.POSITIVE_INFINITY);
    const started = Date.now();
    const err = (await new JobRouter(config, channel).send(job()).catch((e: unknown) => e)) as QueueFullError;
    expect(Date.now() - started).to.be.within(300, 1000);
    expect(err).to.be.instanceOf(QueueFullError);
    expect(err).to.include({ code: 'QUEUE_FULL', queue: 'out', tenant: 'globex', transient: false });
    expect(err.blocked?.tries).to.equal(channel.tries).and.to.be.above(2);
    expect(err.message).to.match(
      /^queue "out" of tenant "globex" is full \(QUEUE_FULL: max_size reached, overflow_policy block\): no room within block_timeout PT0\.3S \(waited 0\.\d s, \d+ tries\), nothing was enqueued$/,
    );
  });

  it('fails at once for a queue whose policy is reject', async () => {
    const channel = new FullThenFree(1);
    const err = await new JobRouter(config, channel).send(job('acme', 'strict')).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(QueueFullError).and.to.have.property('blocked', undefined);
    expect(channel.tries).to.equal(1);
  });

  it('stops waiting at a lost channel, which it reports as it is (transient: the job is given back, not failed)', async () => {
    const lost = new PublishError('channel closed', 'x', 'out', true);
    const err = await new JobRouter(config, new FullThenFree(5, lost)).send(job()).catch((e: unknown) => e);
    expect(err).to.equal(lost);
  });

  it("a stage's emit stops waiting once its handler failed or timed out (the context closed), and tries no more", async () => {
    const channel = new FullThenFree(Number.POSITIVE_INFINITY);
    const parent = createJob({ type: 'in', args: [] }, { queue: 'in', tenant: 'acme' });
    const ctx = new JobContext('relay', ['out'], parent, {}, new JobRouter(config, channel), createLogger({}, 'error'), undefined);
    const emitted = ctx.emit('out', { type: 'doc', args: [] });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(channel.tries).to.be.above(1);
    ctx.close();
    const err = (await emitted.catch((e: unknown) => e)) as QueueFullError;
    const tries = channel.tries;
    expect(err).to.be.instanceOf(QueueFullError);
    expect(err.blocked).to.include({ abandoned: true, tries });
    expect(err.message).to.contain('its sender stopped waiting for room');
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(channel.tries, 'tries after the context closed').to.equal(tries);
  });

  it('a returned handler still waits for its emits (settle): the input job is held until the queue takes them', async () => {
    const channel = new FullThenFree(4);
    const parent = createJob({ type: 'in', args: [] }, { queue: 'in', tenant: 'acme' });
    const ctx = new JobContext('relay', ['out'], parent, {}, new JobRouter(config, channel), createLogger({}, 'error'), undefined);
    void ctx.emit('out', { type: 'doc', args: [] });
    expect(await ctx.settle()).to.equal(1);
    expect(channel.tries).to.equal(5);
  });

  it("counts each refused try of a block queue under policy block (metrics, queue.full), a reject queue's under reject", () => {
    const sightings: QueueFullSighting[] = [];
    const reporter = new QueueFullReporter(config, undefined, { onRefused: (sighting) => sightings.push(sighting) });
    reporter.observe(new QueueFullError('ojs.root', 'out', { queue: 'out', tenant: 'globex' }));
    reporter.observe(new QueueFullError('ojs.root', 'strict', { queue: 'strict', tenant: 'globex' }));
    expect(sightings.map((sighting) => sighting.policy)).to.deep.equal(['block', 'reject']);
  });
});
