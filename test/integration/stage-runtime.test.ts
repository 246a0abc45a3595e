import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { GetMessage } from 'amqplib';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { held } from '../fixtures/test-stages.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'stage-runtime' }, 'error');
const body = (m: GetMessage): Record<string, unknown> => JSON.parse(m.content.toString()) as Record<string, unknown>;

describe('stage runtime against the broker', () => {
  let config: CompiledConfig;
  let running: RunningGroup;
  let names: BrokerNames;
  let raw: RawBroker;
  let publisher: Publisher;

  before(async () => {
    config = withTestConfig(
      {
        tenants: ['acme', 'globex'],
        queues: { jobs: { scope: 'shared' }, in: { default_retry: { max_attempts: 1 } }, out: { max_size: 6 } },
        stages: {
          relay: { module: './test-stages.js', concurrency: 4, options: { tag: 'v1' } },
          fanout: { module: './test-stages.js' },
        },
      },
      path.join(here, '../fixtures/config.json'),
    );
    // Only acme's relay runs: globex's queue must be left alone.
    running = await startGroup(config, [{ stage: 'relay', tenant: 'acme' }, { stage: 'fanout' }], log);
    ({ names, raw, publisher } = running);
  });

  after(() => running.stop());

  afterEach(async () => {
    for (const queue of [
      names.queue('out', 'acme'),
      names.queue('out', 'globex'),
      names.deadQueue('in', 'acme'),
      names.queue('in', 'globex'),
    ]) {
      await raw.drain(queue);
    }
  });

  it('relays a job: the output inherits tenant, trace and parent, the input is acknowledged', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const id = await publisher.publish('in', { type: 'relay.me', args: ['doc-1'], tenant: 'acme', traceparent });
    await waitFor('the relayed job', async () => (await raw.count(names.queue('out', 'acme'))) === 1);
    const [out] = await raw.drain(names.queue('out', 'acme'));
    const job = body(out);
    expect(job).to.include({ type: 'relayed', queue: 'out', tenant: 'acme', attempt: 1 });
    expect(job.args).to.deep.equal(['doc-1@acme', 'v1']);
    expect(job.meta).to.deep.equal({ parent_id: id });
    expect(out.properties.headers).to.include({ 'x-ojs-tenant': 'acme', 'x-ojs-queue': 'out', 'x-ojs-attempt': 1 });
    expect(out.properties.headers?.['x-ojs-traceparent']).to.match(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(out.properties.headers?.['x-ojs-traceparent']).not.to.equal(traceparent);
    expect(out.properties).to.include({ messageId: job.id, type: 'relayed', contentType: 'application/openjobspec+json', deliveryMode: 2 });
    await waitFor('the input acknowledged', async () => (await raw.count(names.queue('in', 'acme'))) === 0);
  });

  it("leaves other tenants' queues alone", async () => {
    await publisher.publish('in', { type: 'relay.me', args: ['for-globex'], tenant: 'globex' });
    await publisher.publish('in', { type: 'relay.me', args: ['for-acme'], tenant: 'acme' });
    await waitFor("acme's job relayed", async () => (await raw.count(names.queue('out', 'acme'))) === 1);
    expect(await raw.count(names.queue('in', 'globex'))).to.equal(1);
    expect(await raw.count(names.queue('out', 'globex'))).to.equal(0);
  });

  it('fans out from a shared queue into the tenant queue of each job', async () => {
    await publisher.publish('jobs', { type: 'fan', args: ['x'], tenant: 'acme' });
    await publisher.publish('jobs', { type: 'fan', args: ['y'], tenant: 'globex' });
    await waitFor('the fanned-out acme job relayed', async () => (await raw.count(names.queue('out', 'acme'))) === 1);
    await waitFor('the globex job in its own queue', async () => (await raw.count(names.queue('in', 'globex'))) === 1);
    const [relayed] = await raw.drain(names.queue('out', 'acme'));
    expect(body(relayed).args).to.deep.equal(['x@acme', 'v1']);
  });

  it('acknowledges only after every emitted job is confirmed: a refused output dead-letters the input, losing nothing', async () => {
    // `out` holds 6 jobs and refuses more (reject-publish): the 7th and 8th copies are nacked.
    for (let i = 0; i < 3; i++) await publisher.publish('in', { type: 'relay.me', args: [`fill-${i}`, 'twice'], tenant: 'acme' });
    await waitFor('out filled', async () => (await raw.count(names.queue('out', 'acme'))) === 6);
    const id = await publisher.publish('in', { type: 'relay.me', args: ['overflow', 'twice'], tenant: 'acme' });
    await waitFor('the input in its dead letters', async () => (await raw.count(names.deadQueue('in', 'acme'))) === 1);
    const [dead] = await raw.drain(names.deadQueue('in', 'acme'));
    const job = body(dead);
    expect(job.id).to.equal(id);
    expect((job.error as { type: string }).type).to.equal('QUEUE_FULL');
    expect(dead.properties.headers).to.include({ 'x-ojs-error-type': 'QUEUE_FULL', 'x-ojs-tenant': 'acme' });
    expect(await raw.count(names.queue('out', 'acme'))).to.equal(6);
    expect(await raw.count(names.queue('in', 'acme'))).to.equal(0);
  });

  it('dead-letters a job whose handler throws, with the structured error and its envelope', async () => {
    const id = await publisher.publish('in', { type: 'relay.me', args: ['bad', 'throw'], tenant: 'acme', meta: { origin: 'test' } });
    await waitFor('the dead letter', async () => (await raw.count(names.deadQueue('in', 'acme'))) === 1);
    const [dead] = await raw.drain(names.deadQueue('in', 'acme'));
    const job = body(dead);
    expect(job).to.include({ id, type: 'relay.me', queue: 'in', tenant: 'acme' });
    expect(job.error).to.include({ type: 'TypeError', message: 'cannot relay bad' });
    expect((job.error as { backtrace: string[] }).backtrace[0]).to.match(/^at /);
    expect(job.meta).to.include({ origin: 'test', stage: 'relay' });
    expect(dead.properties.headers).to.include({ 'x-ojs-error-type': 'TypeError', 'x-ojs-error-message': 'cannot relay bad' });
  });

  it('dead-letters emits to an output the stage did not declare, and NonRetryableError with its type', async () => {
    await publisher.publish('in', { type: 'relay.me', args: ['s', 'stray'], tenant: 'acme' });
    await publisher.publish('in', { type: 'relay.me', args: ['f', 'fatal'], tenant: 'acme' });
    await waitFor('two dead letters', async () => (await raw.count(names.deadQueue('in', 'acme'))) === 2);
    const types = (await raw.drain(names.deadQueue('in', 'acme'))).map((m) => m.properties.headers?.['x-ojs-error-type']);
    expect(types.sort()).to.deep.equal(['RefusedError', 'UNKNOWN_OUTPUT']);
  });

  it('runs at most `concurrency` handlers at once and keeps the rest prefetched', async () => {
    // The fixture's gate is shared by every test file in the run: closed here, whoever opened it.
    held.open = false;
    held.peak = 0;
    for (let i = 0; i < 6; i++) await publisher.publish('in', { type: 'relay.me', args: [`held-${i}`, 'hold'], tenant: 'acme' });
    await waitFor('four handlers running', () => held.active === 4);
    // The other two are prefetched (prefetch 14), not started.
    await waitFor('the rest delivered to the stage', async () => (await raw.count(names.queue('in', 'acme'))) === 0);
    expect(held.active).to.equal(4);
    held.open = true;
    await waitFor('all six relayed (out holds six)', async () => (await raw.count(names.queue('out', 'acme'))) === 6);
    expect(held.peak).to.equal(4);
  });

  it('dead-letters malformed messages with INVALID_PAYLOAD and keeps consuming', async () => {
    const queue = names.queue('in', 'acme');
    await raw.publish('', queue, '{not json', { headers: { 'x-ojs-tenant': 'acme' }, messageId: 'm1' });
    await raw.publish('', queue, JSON.stringify({ id: 'm2', type: 't', queue: 'in', args: 'nope' }), {
      headers: { 'x-ojs-tenant': 'acme' },
    });
    await raw.publish('', queue, JSON.stringify({ id: 'm3', type: 't', queue: 'in', args: [], tenant: 'globex' }), {
      headers: { 'x-ojs-tenant': 'acme' },
    });
    await publisher.publish('in', { type: 'relay.me', args: ['still-alive'], tenant: 'acme' });
    await waitFor('three dead letters', async () => (await raw.count(names.deadQueue('in', 'acme'))) === 3);
    const dead = await raw.drain(names.deadQueue('in', 'acme'));
    expect(dead.map((m) => m.properties.headers?.['x-ojs-error-type'])).to.deep.equal([
      'INVALID_PAYLOAD',
      'INVALID_PAYLOAD',
      'INVALID_PAYLOAD',
    ]);
    expect(dead[0].content.toString()).to.equal('{not json');
    expect(dead[0].properties.headers?.['x-ojs-error-message']).to.match(/not JSON/);
    expect(dead[1].properties.headers?.['x-ojs-error-message']).to.match(/"args" must be a JSON array/);
    expect(dead[2].properties.headers?.['x-ojs-error-message']).to.match(/names tenant "globex"/);
    await waitFor('the good job relayed', async () => (await raw.count(names.queue('out', 'acme'))) === 1);
  });
});
