import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { GetMessage } from 'amqplib';
import { replayUnroutable } from '../../src/dead-letters/unroutable.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import type { Job } from '../../src/job/job.types.js';
import { toWire } from '../../src/job/amqp-mapping.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { DELAY_LEVELS, MAX_DELAY_SECONDS } from '../../src/topology/delay-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { scheduled, seen } from '../fixtures/failure-stages.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'scheduling' }, 'error');
const PDF = 'application/pdf';
const body = (m: GetMessage): Job => JSON.parse(m.content.toString()) as Job;

const SCHEDULING_CONFIG: RawConfig = {
  tenants: ['acme', 'globex'],
  queues: {
    work: { default_retry: { max_attempts: 1 } },
    plans: { default_retry: { max_attempts: 1 } },
    shared_q: { scope: 'shared' },
    conversions: { variants: { by: 'mime', values: { pdf: [PDF] } } },
  },
  stages: {
    flaky: { module: './failure-stages.js' },
    scheduler: { module: './failure-stages.js' },
  },
};

/**
 * Scheduled jobs (`scheduled_at`) wait on the broker's delay ladder and come to the `due`
 * companion of the queue they were published to. Times are measured from the moment of
 * publishing (or emitting) to the moment the handler runs the job. The ladder holds a job for
 * whole seconds from when the broker took it, so it is never early by the clock of the process
 * that published it (whose time was read before it published); "by 5 s" leaves 2 s of slack
 * for a loaded machine.
 */
describe('scheduled jobs', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let running: RunningGroup;
  let names: BrokerNames;
  let raw: RawBroker;
  let publisher: Publisher;
  let key = 0;
  const nextKey = (): string => `scheduled-${++key}`;

  before(async () => {
    config = withTestConfig(SCHEDULING_CONFIG, path.join(here, '../fixtures/config.json'));
    running = await startGroup(
      config,
      [
        { stage: 'flaky', tenant: 'acme' },
        { stage: 'scheduler', tenant: 'acme' },
      ],
      log,
    );
    ({ names, raw, publisher } = running);
  });

  after(async () => {
    await running?.stop();
    if (config) await teardown(config, [], provisionTopology(config, [], 'initech'));
  });

  /** The first time the flaky stage ran the job `k`. */
  async function ranAt(k: string): Promise<number> {
    const runs = await waitFor(`job ${k} run`, () => seen.get(k), 10_000, 20);
    return runs[0].at;
  }

  it('delivers a job published 3 s ahead no sooner than 3 s and by 5 s', async () => {
    const k = nextKey();
    const publishedAt = Date.now();
    await publisher.publish('work', {
      type: 'flaky',
      args: ['ok', k],
      tenant: 'acme',
      scheduled_at: new Date(publishedAt + 3000).toISOString(),
    });
    const waited = (await ranAt(k)) - publishedAt;
    expect(waited, `ran ${waited} ms after publishing`).to.be.at.least(3000).and.at.most(5000);
    expect(seen.get(k)).to.have.length(1);
  });

  it('delivers a job a stage emitted 3 s ahead (ctx.emit) no sooner than 3 s and by 5 s', async () => {
    const k = nextKey();
    await publisher.publish('plans', { type: 'plan', args: [k, 3000], tenant: 'acme' });
    const ran = await ranAt(k);
    const emitted = scheduled.get(k);
    expect(emitted, 'the scheduler ran').not.to.equal(undefined);
    const waited = ran - (emitted?.at ?? 0);
    expect(waited, `ran ${waited} ms after it was emitted`).to.be.at.least(3000).and.at.most(5000);
  });

  it('puts a scheduled job in the due queue of the variant queue its header picks, else of the general queue, and of a shared queue', async () => {
    const pdf = await publisher.publish('conversions', {
      type: 'convert',
      tenant: 'acme',
      headers: { mime: PDF },
      scheduled_at: new Date(Date.now() + 1000).toISOString(),
    });
    const text = await publisher.publish('conversions', {
      type: 'convert',
      tenant: 'acme',
      headers: { mime: 'text/plain' },
      scheduled_at: new Date(Date.now() + 1000).toISOString(),
    });
    const shared = await publisher.publish('shared_q', { type: 's', scheduled_at: new Date(Date.now() + 1000).toISOString() });
    const watched = [
      names.dueQueue('conversions', 'acme', 'pdf'),
      names.dueQueue('conversions', 'acme'),
      names.dueQueue('shared_q'),
      names.queue('conversions', 'acme', 'pdf'),
      names.queue('conversions', 'acme'),
      names.queue('shared_q'),
      names.dueQueue('conversions', 'globex', 'pdf'),
      names.dueQueue('conversions', 'globex'),
      names.unroutable,
    ];
    await waitFor('all three due', async () => {
      const counts = await raw.counts(watched.slice(0, 3));
      return Object.values(counts).every((n) => n === 1);
    });
    const landed: Record<string, string[]> = {};
    for (const queue of watched) {
      const messages = await raw.drain(queue);
      if (messages.length > 0) landed[queue] = messages.map((m) => body(m).id);
    }
    expect(landed).to.deep.equal({
      [names.dueQueue('conversions', 'acme', 'pdf')]: [pdf],
      [names.dueQueue('conversions', 'acme')]: [text],
      [names.dueQueue('shared_q')]: [shared],
    });
  });

  it('holds a job beyond the ladder limit in its top level, as one within it; a stage emitting beyond it emits it so too', async () => {
    const top = names.delayLevel(DELAY_LEVELS - 1);
    const far = await publisher.publish('work', {
      type: 'flaky',
      args: ['ok', nextKey()],
      tenant: 'acme',
      scheduled_at: new Date(Date.now() + (MAX_DELAY_SECONDS + 60) * 1000).toISOString(),
    });
    const held = await publisher.publish('work', {
      type: 'flaky',
      args: ['ok', nextKey()],
      tenant: 'acme',
      scheduled_at: new Date(Date.now() + (MAX_DELAY_SECONDS - 60) * 1000).toISOString(),
    });
    // Both have the highest bit set: they wait first in the top level, 2^19 s.
    const parked = await raw.drain(top);
    expect(parked.map((m) => m.properties.messageId).sort()).to.deep.equal([far, held].sort());

    const emitter = nextKey();
    await publisher.publish('plans', { type: 'plan', args: [emitter, (MAX_DELAY_SECONDS + 60) * 1000], tenant: 'acme' });
    const [emitted] = await waitFor('the emitted job in the top level', async () => {
      const got = await raw.drain(top);
      return got.length > 0 ? got : undefined;
    });
    expect(body(emitted).args).to.deep.equal(['ok', emitter]);
    expect(await raw.count(names.deadQueue('plans', 'acme'))).to.equal(0);
    expect(seen.get(emitter)).to.equal(undefined);
  });

  it('sends a job that comes out of the ladder more than a minute before its time back onto it for the rest, unrun', async () => {
    const k = nextKey();
    const due = names.dueQueue('work', 'acme');
    // As the ladder delivers a job scheduled beyond its reach: into the due queue, its time still a day away.
    const job: Job = {
      specversion: '1.0',
      id: `0199a000-0000-7000-8000-${String(key).padStart(12, '0')}`,
      type: 'flaky',
      queue: 'work',
      args: ['ok', k],
      meta: {},
      attempt: 1,
      tenant: 'acme',
      created_at: new Date().toISOString(),
      scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
    } as Job;
    const wire = toWire(job, { tenantHeader: config.tenantHeader });
    await raw.publish('', due, wire.content, wire.options);
    // A day is 86,400 s: bit 16 (65,536 s) is its highest, the first level it waits in.
    const level = names.delayLevel(16);
    const [hopped] = await waitFor('the job back on the ladder', async () => {
      const got = await raw.drain(level);
      return got.length > 0 ? got : undefined;
    });
    expect(hopped.properties.messageId).to.equal(job.id);
    expect(body(hopped).attempt, 'not an attempt').to.equal(1);
    expect(seen.get(k), 'not run').to.equal(undefined);
    expect(await raw.count(due)).to.equal(0);
  });

  it('keeps a job scheduled for a tenant not provisioned in unroutable, and replays it by the ladder once it is', async () => {
    const id = await publisher.publish('work', {
      type: 'flaky',
      args: ['ok', nextKey()],
      tenant: 'initech',
      scheduled_at: new Date(Date.now() + 1000).toISOString(),
    });
    await waitFor('the job in unroutable', async () => (await raw.count(names.unroutable)) === 1);
    await declareTopologyOnce(config, provisionTopology(config, [], 'initech'), log);
    expect(await replayUnroutable(config, log)).to.deep.equal({ replayed: 1, kept: 0 });
    const due = names.dueQueue('work', 'initech');
    await waitFor("the job in initech's due queue", async () => (await raw.count(due)) === 1);
    const [replayed] = await raw.drain(due);
    expect(replayed.properties.messageId).to.equal(id);
  });
});
