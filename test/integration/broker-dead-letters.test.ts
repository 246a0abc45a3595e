import { expect } from 'chai';
import type { GetMessage } from 'amqplib';
import { listDeadLetters, retryDeadLetters } from '../../src/dead-letters/dead-letter-actions.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionBroker } from '../../src/plan/provision-broker.js';
import { BrokerNames } from '../../src/topology/names.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'broker-dead-letters' }, 'error');
const body = (m: GetMessage): Job => JSON.parse(m.content.toString()) as Job;
type HistoryEntry = { type?: string; message?: string; attempt?: number; dead_lettered_at?: string };

/**
 * Dead letters the broker makes itself (per-message TTL, drop-head overflow, reject without
 * requeue) carry no `x-ojs-error-*`: the reason comes from `x-death`. No stage consumes these
 * queues, so whatever reaches a dead-letter queue got there by the broker's hand.
 */
describe('dead letters made by the broker', () => {
  let config: CompiledConfig;
  let names: BrokerNames;
  let raw: RawBroker;
  let publisher: Publisher;
  const idle = (): string => names.queue('idle', 'acme');
  const bounded = (): string => names.queue('bounded', 'acme');
  const deadIdle = (): string => names.deadQueue('idle', 'acme');
  const deadBounded = (): string => names.deadQueue('bounded', 'acme');

  before(async () => {
    config = withTestConfig({
      tenants: ['acme'],
      queues: { idle: {}, bounded: { max_size: 1, overflow_policy: 'drop_oldest' } },
    });
    names = new BrokerNames(config.prefix);
    await provisionBroker(config, [], log);
    raw = await RawBroker.connect(config.broker.url);
    publisher = await Publisher.connect(config, { log });
  });

  after(async () => {
    await publisher.close();
    await raw.close();
    await teardown(config);
  });

  afterEach(async () => {
    for (const queue of [idle(), bounded(), deadIdle(), deadBounded()]) await raw.drain(queue);
  });

  it('lists a job whose enqueue_ttl ran out as EXPIRED, and dead retry records it in meta.errors', async () => {
    const id = await publisher.publish('idle', { type: 't', args: ['late'], tenant: 'acme', enqueue_ttl: 'PT1S' });
    await waitFor('the expired job dead', async () => (await raw.count(deadIdle())) === 1);

    const [entry] = await listDeadLetters(config, 'idle', 'acme', log);
    expect(entry).to.include({ id, errorType: 'EXPIRED', isJob: true, attempt: 1 });
    expect(entry.errorMessage).to.equal(`expired in ${idle()} (enqueue_ttl 1000 ms)`);
    expect(entry.deadLetteredAt, 'the time the broker recorded').to.be.a('string');

    expect(await retryDeadLetters(config, 'idle', 'acme', log)).to.deep.equal({ retried: 1, kept: 0 });
    // The revived job keeps its enqueue_ttl, so nobody consuming `idle`, it expires once more:
    // the second dead letter carries the first death in its history.
    await waitFor('dead again', async () => (await raw.count(deadIdle())) === 1 && (await raw.count(idle())) === 0);
    const [again] = await raw.drain(deadIdle());
    const job = body(again);
    expect(job.id).to.equal(id);
    const history = job.meta.errors as HistoryEntry[];
    expect(history).to.have.length(1);
    expect(history[0]).to.include({ type: 'EXPIRED', message: `expired in ${idle()} (enqueue_ttl 1000 ms)`, attempt: 1 });
    expect(history[0].dead_lettered_at).to.equal(entry.deadLetteredAt);
  });

  it('lists the job a drop_oldest queue pushed out as QUEUE_FULL, and dead retry records it in meta.errors', async () => {
    const oldest = await publisher.publish('bounded', { type: 't', args: ['first'], tenant: 'acme' });
    const newest = await publisher.publish('bounded', { type: 't', args: ['second'], tenant: 'acme' });
    await waitFor('the oldest job dead', async () => (await raw.count(deadBounded())) === 1);

    const [entry] = await listDeadLetters(config, 'bounded', 'acme', log);
    expect(entry).to.include({ id: oldest, errorType: 'QUEUE_FULL', isJob: true });
    expect(entry.errorMessage).to.equal(`overflowed in ${bounded()} (max_size reached, overflow_policy drop_oldest)`);

    // Make room, so that the revived job does not push the newest out in turn.
    const [kept] = await raw.drain(bounded());
    expect(kept.properties.messageId).to.equal(newest);
    expect(await retryDeadLetters(config, 'bounded', 'acme', log)).to.deep.equal({ retried: 1, kept: 0 });
    await waitFor('the revived job back', async () => (await raw.count(bounded())) === 1);
    const [revived] = await raw.drain(bounded());
    const job = body(revived);
    expect(job).to.include({ id: oldest, attempt: 1 });
    expect(job.meta.errors as HistoryEntry[]).to.have.length(1);
    expect((job.meta.errors as HistoryEntry[])[0]).to.include({ type: 'QUEUE_FULL', attempt: 1 });
    expect(await raw.count(deadBounded())).to.equal(0);
  });

  it('lists a job rejected without requeue (a stage with no reason it could publish) as REJECTED', async () => {
    const id = await publisher.publish('idle', { type: 't', args: ['refused'], tenant: 'acme' });
    expect(await raw.reject(idle())).to.equal(id);
    await waitFor('the rejected job dead', async () => (await raw.count(deadIdle())) === 1);

    const [entry] = await listDeadLetters(config, 'idle', 'acme', log);
    expect(entry).to.include({ id, errorType: 'REJECTED' });
    expect(entry.errorMessage).to.equal(`rejected in ${idle()} (a stage refused it without a reason it could publish)`);
  });
});
