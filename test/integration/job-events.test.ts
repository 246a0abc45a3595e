import path from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { expect } from 'chai';
import type { CompiledConfig } from '../../src/config/config.types.js';
import type { OjsEvent } from '../../src/events/ojs-event.js';
import { BrokerFlags } from '../../src/flags/broker-flags.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import type { StageRunner } from '../../src/runner/stage-runner.js';
import { loadStage, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { EventTap } from '../helpers/event-tap.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'job-events' }, 'error');

describe('job.* events of the queues with events: true', function () {
  this.timeout(60_000);
  // acme's guard_in has events on (the queue's setting); globex turns them off for itself.
  const config: CompiledConfig = withTestConfig(
    {
      tenants: ['acme', { name: 'globex', queues: { guard_in: { events: false } } }],
      queues: { guard_in: { events: true, default_retry: { max_attempts: 2, initial_interval: 'PT1S', jitter: false } } },
      stages: { guarded: { module: './middleware-stages.js', concurrency: 2 } },
    },
    path.join(here, '../fixtures/config.json'),
  );
  const names = new BrokerNames(config.prefix);
  let stage: LoadedStage;
  let group: StageGroup;
  let publisher: Publisher;
  let tap: EventTap;

  const publish = (mode: string, tenant: string, batch?: string): Promise<string> =>
    publisher.publish('guard_in', { type: 'guard', args: [mode], tenant, ...(batch === undefined ? {} : { batch }) });
  const eventsOf = (id: string): OjsEvent[] => tap.events.filter((t) => t.event.subject === id).map((t) => t.event);
  const runnerOf = (tenant: string): StageRunner => group.runners.find((runner) => runner.tenant === tenant) as StageRunner;

  /** Sets or clears the flag `batch cancel called-off` sets. */
  const calledOff = async (on: boolean): Promise<void> => {
    const connection = await amqplib.connect(config.broker.url);
    try {
      const flags = new BrokerFlags(connection, { prefix: config.prefix, durable: false });
      const flag = { kind: 'batch-cancelled', batch: 'called-off' } as const;
      await (on ? flags.set(flag) : flags.clear(flag));
    } finally {
      await connection.close();
    }
  };

  before(async () => {
    tap = await EventTap.open(config.broker.url, names.events);
    stage = await loadStage(config, 'guarded');
    group = new StageGroup(
      config,
      ['acme', 'globex'].map((tenant) => ({ stage, tenant })),
      log,
    );
    await group.start(true);
    publisher = await Publisher.connect(config, { log });
  });

  after(async () => {
    await publisher?.close();
    await group?.stop();
    await tap?.close();
    await calledOff(false);
    await teardown(config, [stage.metadata]);
  });

  it('publishes job.completed, job.failed per failed attempt, job.discarded and job.cancelled with the OJS data, the job id as subject', async () => {
    const plain = await publish('plain', 'acme');
    const flaky = await publish('flaky', 'acme');
    const discard = await publish('discard', 'acme');
    const hopeless = await publish('hopeless', 'acme');
    // A cancelled batch (the flag `batch cancel` sets): its job is discarded unrun, reported cancelled.
    await calledOff(true);
    const cancelled = await publish('plain', 'acme', 'called-off');

    const types = (id: string): string[] => eventsOf(id).map((e) => e.type);
    await waitFor('every job settled and evented', () =>
      [
        types(plain).includes('job.completed'),
        types(flaky).includes('job.completed'),
        types(discard).includes('job.discarded'),
        types(hopeless).includes('job.discarded'),
        types(cancelled).includes('job.cancelled'),
      ].every(Boolean),
    );
    const base = { job_type: 'guard', queue: 'guard_in', tenant: 'acme', stage: 'guarded' };

    const [completed] = eventsOf(plain);
    expect(types(plain)).to.deep.equal(['job.completed']);
    expect(completed).to.include({ specversion: '1.0', type: 'job.completed', source: 'stagecoach/guarded' });
    expect(completed?.data).to.deep.include({ ...base, attempt: 1 });
    expect(completed?.data.duration_ms).to.be.a('number');

    expect(types(flaky)).to.deep.equal(['job.failed', 'job.completed']);
    expect(eventsOf(flaky)[0]?.data).to.deep.include({ ...base, attempt: 1 });
    expect(eventsOf(flaky)[0]?.data.error).to.deep.include({ code: 'Error', message: 'the guard failed on attempt 1', retryable: true });
    expect(eventsOf(flaky)[1]?.data).to.deep.include({ attempt: 2 });

    expect(types(discard)).to.deep.equal(['job.failed', 'job.discarded']);
    expect(eventsOf(discard)[0]?.data.error).to.deep.include({ retryable: false });
    expect(eventsOf(discard)[1]?.data).to.deep.equal({
      ...base,
      total_attempts: 1,
      last_error: { code: 'DiscardJob', message: 'the guard discarded it' },
      route: 'discard',
    });

    expect(types(hopeless)).to.deep.equal(['job.failed', 'job.discarded']);
    expect(eventsOf(hopeless)[1]?.data).to.deep.equal({
      ...base,
      total_attempts: 1,
      last_error: { code: 'GuardGaveUp', message: 'the guard gave up on it' },
      route: 'dead_letter',
    });

    expect(types(cancelled)).to.deep.equal(['job.cancelled']);
    expect(eventsOf(cancelled)[0]?.data).to.deep.equal({
      ...base,
      cancelled_by: 'batch',
      reason: 'batch "called-off" was cancelled',
      batch: 'called-off',
    });
  });

  it('publishes none for a queue whose events are off (for globex, by its own setting)', async () => {
    const runner = runnerOf('globex');
    const before = { ...runner.stats };
    const ids = [await publish('plain', 'globex'), await publish('flaky', 'globex'), await publish('discard', 'globex')];
    await waitFor(
      "globex's jobs settled",
      () => runner.stats.completed === before.completed + 2 && runner.stats.discarded === before.discarded + 1,
    );
    // Events of one process leave on one channel, in order: once a later acme event arrived,
    // any globex event published before it would have too.
    const sentinel = await publish('plain', 'acme');
    await waitFor("the sentinel's job.completed", () => eventsOf(sentinel).length === 1);
    expect(ids.flatMap(eventsOf)).to.deep.equal([]);
    expect(tap.events.filter((t) => t.event.type.startsWith('job.') && t.event.data.tenant === 'globex')).to.deep.equal([]);
  });
});
