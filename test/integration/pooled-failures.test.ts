import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { expect } from 'chai';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { seen } from '../fixtures/failure-stages.js';
import { spawnCli } from '../helpers/cli.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
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

/**
 * The cost of one crash to a pooled process (issue 22, item 4): a pooled process SIGKILLed under
 * a steady stream and restarted must not lose much more throughput than running its suspects
 * alone takes. What the dead process held comes back redelivered and is moved to its tenants'
 * suspect queues; the restarted process finds a backlog (the stream went on while it was down)
 * that fills every tenant's prefetch, and runs the suspects alone: each isolation stops every
 * tenant's intake, waits for the jobs in flight and hands back what was prefetched. Lost
 * throughput: the restarted process's time to clear the backlog once started, less the time its
 * runs take at full speed (slots / job time).
 */
describe('a pooled process SIGKILLed under load and restarted', function () {
  this.timeout(180_000);
  const TENANTS = Array.from({ length: 20 }, (_, i) => `s${i}`);
  const SLOTS = 25;
  const JOB_MS = 100;
  /** Jobs a second in the stream, below the SLOTS / JOB_MS the process can take. */
  const STREAM = 150;
  /** Jobs per tenant that arrived while the process was down. */
  const BACKLOG = 50;
  let file: ConfigFile;
  let group: StageGroup | undefined;
  let child: ReturnType<typeof spawnCli> | undefined;

  before(async () => {
    const settings: RawConfig = {
      tenants: TENANTS,
      queues: { work: { default_retry: { max_attempts: 3, initial_interval: 'PT1S', jitter: false } } },
      stages: { flaky: { module: FAILURE_STAGES_MODULE, concurrency: SLOTS } },
    };
    const stages = await loadAllStages(withTestConfig({ ...settings }, path.join(here, '../fixtures/config.json')));
    file = await writeConfigFile(settings, [(stages.find((stage) => stage.metadata.name === 'flaky') as LoadedStage).metadata], 'storm');
  });

  after(async () => {
    child?.kill('SIGKILL');
    await group?.stop();
    await file.remove();
  });

  it('loses less than 5 s of throughput to the crash', async () => {
    const { config, names, raw } = file;
    const publisher = await Publisher.connect(config, { log });
    let published = 0;
    const publishOne = (): Promise<string> => {
      const n = published++;
      const tenant = TENANTS[n % TENANTS.length];
      return publisher.publish('work', { type: 'flaky', args: ['slow', `${tenant}-${n}`, JOB_MS], tenant });
    };
    const done = new Set<string>();
    const collect = async (): Promise<number> => {
      for (const tenant of TENANTS) {
        for (const message of await raw.drain(names.queue('done', tenant)))
          done.add((JSON.parse(message.content.toString()) as Job).args[0] as string);
      }
      return done.size;
    };
    try {
      // The process that dies holds one delivery per tenant queue (`tenant_prefetch` 1): what it
      // held comes back as suspects, as many as a process keeping up holds in flight.
      const victim = path.join(file.dir, 'victim.json');
      const settings = JSON.parse(await readFile(file.file, 'utf8')) as RawConfig & { stages: Record<string, object> };
      await writeFile(victim, JSON.stringify({ ...settings, stages: { flaky: { ...settings.stages.flaky, tenant_prefetch: 1 } } }));
      child = spawnCli(['run', 'flaky', '--tenants', TENANTS.join(','), '--config', victim]);
      const queues = TENANTS.map((tenant) => names.queue('work', tenant));
      await waitFor(
        'the pooled process consuming',
        async () => {
          for (const queue of queues) if (((await raw.consumers(queue)) ?? 0) === 0) return false;
          return true;
        },
        30_000,
        200,
      );
      // The stream, until the process has run a few hundred of it.
      let streaming = true;
      const stream = (async () => {
        while (streaming) {
          const tick = Date.now();
          await Promise.all(Array.from({ length: STREAM / 20 }, publishOne));
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, 50 - (Date.now() - tick))));
        }
      })();
      // Under load, keeping up with it: what it holds is what it runs, and a little ahead.
      await waitFor('the pooled process under load', async () => (await collect()) >= 400, 60_000, 200);
      await waitFor(
        'the pooled process keeping up',
        async () => {
          let ready = 0;
          for (const queue of queues) ready += (await raw.count(queue)) ?? 0;
          return ready < TENANTS.length;
        },
        30_000,
        100,
      );
      const exited = new Promise((resolve) => child?.once('exit', resolve));
      child.kill('SIGKILL');
      streaming = false;
      await stream;
      await exited;
      // What arrived while it was down.
      for (let i = 0; i < BACKLOG * TENANTS.length; i += 100) await Promise.all(Array.from({ length: 100 }, publishOne));
    } finally {
      await publisher.close();
    }

    // The restart: the same pooled process, here, where its runs and counts can be read.
    const flaky = (await loadAllStages(config)).find((stage) => stage.metadata.name === 'flaky') as LoadedStage;
    const startingAt = Date.now();
    group = new StageGroup(
      config,
      TENANTS.map((tenant) => ({ stage: flaky, tenant })),
      log,
      { pooled: { stage: flaky } },
    );
    await group.start();
    // From here on: what a restart costs without a crash (connecting, declaring) is not counted.
    const restartedAt = Date.now();
    await waitFor('every job done', async () => (await collect()) === published, 150_000, 200);
    const runs = [...seen.entries()].filter(([key]) => TENANTS.some((tenant) => key.startsWith(`${tenant}-`))).flatMap(([, r]) => r);
    const finishedAt = Math.max(...runs.map((run) => run.at)) + JOB_MS;
    const lostSeconds = (finishedAt - restartedAt) / 1000 - (runs.length * JOB_MS) / SLOTS / 1000;
    const handBacks = group.runners.reduce((sum, runner) => sum + runner.stats.givenBack, 0);
    const suspects = group.runners.reduce((sum, runner) => sum + runner.stats.poisonRedeliveries, 0);
    console.log(
      `      restart ${((restartedAt - startingAt) / 1000).toFixed(1)} s, then: ${runs.length} runs (${suspects} suspects) in ${((finishedAt - restartedAt) / 1000).toFixed(1)} s; ` +
        `throughput lost: ${lostSeconds.toFixed(1)} s; hand-backs: ${handBacks}`,
    );
    expect(lostSeconds, 'seconds of throughput lost to the crash').to.be.below(5);
  });
});
