import path from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { expect } from 'chai';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { setQueueState } from '../../src/state/set-queue-state.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { seen } from '../fixtures/failure-stages.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

/** Three attempts, 1 s then 2 s apart: the failures suite's retry policy. */
const CONFIG: RawConfig = {
  tenants: ['acme', 'globex'],
  queues: { work: { default_retry: { max_attempts: 3, initial_interval: 'PT1S', backoff_coefficient: 2, jitter: false } } },
  stages: { flaky: { module: './failure-stages.js', concurrency: 4 } },
};

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'pooled-failures' }, 'error');

/**
 * A pooled process runs each tenant's queue as a single-tenant process would: retries through
 * the tenant's own `due` queue, dead letters in its own dead-letter queue, a paused tenant's jobs
 * waiting while the others run, and a job redelivered after a crash run alone as a suspect, on
 * the channels the tenants share.
 */
describe('pooled processes: failures, pause and suspects per tenant', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let names: BrokerNames;
  let flaky: LoadedStage;
  let raw: RawBroker;
  let group: StageGroup | undefined;

  before(async () => {
    config = withTestConfig(CONFIG, path.join(here, '../fixtures/config.json'));
    names = new BrokerNames(config.prefix);
    const stages = await loadAllStages(config);
    flaky = stages.find((stage) => stage.metadata.name === 'flaky') as LoadedStage;
    // The `done` queues, which only their consumers or `provision` declare.
    await declareTopologyOnce(config, provisionTopology(config, [flaky.metadata]), log);
    raw = await RawBroker.connect(config.broker.url);
  });

  afterEach(async () => {
    await group?.stop();
    group = undefined;
  });

  after(async () => {
    await raw.close();
    await teardown(config, [flaky.metadata]);
  });

  async function startPooled(): Promise<StageGroup> {
    const started = new StageGroup(
      config,
      ['acme', 'globex'].map((tenant) => ({ stage: flaky, tenant })),
      log,
      { pooled: { stage: flaky } },
    );
    await started.start();
    return started;
  }

  async function publish(tenant: string, args: unknown[]): Promise<void> {
    const publisher = await Publisher.connect(config, { log });
    try {
      await publisher.publish('work', { type: 'flaky', args, tenant });
    } finally {
      await publisher.close();
    }
  }

  it('retries through the tenant’s own due queue and dead-letters into its own dead letters', async () => {
    group = await startPooled();
    await publish('acme', ['fail-times', 'p-retry', 1]);
    await publish('globex', ['always', 'p-dead']);
    await waitFor('acme’s retried job done', async () => (await raw.count(names.queue('done', 'acme'))) === 1, 20_000);
    expect(seen.get('p-retry')?.map((s) => s.attempt)).to.deep.equal([1, 2]);
    await waitFor('globex’s job dead', async () => (await raw.count(names.deadQueue('work', 'globex'))) === 1, 30_000);
    expect(seen.get('p-dead')?.map((s) => s.attempt)).to.deep.equal([1, 2, 3]);
    expect(await raw.count(names.deadQueue('work', 'acme')), 'nothing of globex in acme’s dead letters').to.equal(0);
    await raw.drain(names.queue('done', 'acme'));
    await raw.drain(names.deadQueue('work', 'globex'));
  });

  it('holds a paused tenant’s jobs while the others run, and runs them on resume', async () => {
    group = await startPooled();
    const acme = (): string | undefined => group?.runners.find((r) => r.tenant === 'acme')?.state;
    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'paused', log);
    await waitFor('acme paused', () => acme() === 'paused');
    await publish('acme', ['ok', 'p-paused']);
    await publish('globex', ['ok', 'p-running']);
    await waitFor('globex’s job done', async () => (await raw.count(names.queue('done', 'globex'))) === 1);
    expect(await raw.count(names.queue('work', 'acme')), 'acme’s job waits in its queue').to.equal(1);
    expect(await raw.consumers(names.queue('work', 'acme')), 'nobody consumes the paused queue').to.equal(0);
    expect(group.readiness().ready, 'paused on purpose is still ready').to.equal(true);
    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'active', log);
    await waitFor('acme’s job done after resume', async () => (await raw.count(names.queue('done', 'acme'))) === 1);
    await raw.drain(names.queue('done', 'acme'));
    await raw.drain(names.queue('done', 'globex'));
  });

  it('runs a job redelivered after a crash alone, as a suspect, through the shared suspect channel', async () => {
    // A process that took the job and died before settling it: the broker redelivers it flagged.
    await publish('acme', ['ok', 'p-suspect']);
    const crashed = await amqplib.connect(config.broker.url);
    const channel = await crashed.createChannel();
    await channel.prefetch(1);
    const taken = new Promise<void>((resolve) => void channel.consume(names.queue('work', 'acme'), () => resolve(), { noAck: false }));
    await taken;
    await crashed.close();

    group = await startPooled();
    await waitFor('the suspect run and done', async () => (await raw.count(names.queue('done', 'acme'))) === 1, 20_000);
    // The crash counts as an attempt: the suspect runs as attempt 2.
    expect(seen.get('p-suspect')?.map((s) => s.attempt)).to.deep.equal([2]);
    expect(await raw.count(names.suspectQueue('work', 'acme'))).to.equal(0);
    await raw.drain(names.queue('done', 'acme'));
  });
});
