import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { sendControl } from '../../src/control/send-control.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { finished, spawnCli } from '../helpers/cli.js';
import { AMQP_URL, RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { FAILURE_STAGES_MODULE, writeConfigFile, type ConfigFile } from '../helpers/config-file.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'lifecycle' }, 'error');

describe('queue states on the broker and worker states through the control exchange', () => {
  let config: CompiledConfig;
  let running: RunningGroup;
  let names: BrokerNames;
  let group: StageGroup;
  let raw: RawBroker;
  let publisher: Publisher;
  const work = (tenant: string): string => names.queue('work', tenant);
  const done = (tenant: string): string => names.queue('done', tenant);
  const ok = (tenant: string, key: string): Promise<string> => publisher.publish('work', { type: 'flaky', args: ['ok', key], tenant });

  before(async () => {
    config = withTestConfig(
      { tenants: ['acme', 'globex'], stages: { flaky: { module: './failure-stages.js', concurrency: 4 } } },
      path.join(here, '../fixtures/config.json'),
    );
    running = await startGroup(
      config,
      [
        { stage: 'flaky', tenant: 'acme' },
        { stage: 'flaky', tenant: 'globex' },
      ],
      log,
    );
    ({ names, group, raw, publisher } = running);
  });

  after(() => running.stop());

  it("pause stops consuming one tenant's queue while the others continue; resume restarts it", async () => {
    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'paused', log);
    await waitFor('acme paused', () => group.runners.find((r) => r.name === 'flaky/acme')?.state === 'paused');
    for (let i = 0; i < 5; i++) {
      await ok('acme', `pa-${i}`);
      await ok('globex', `pg-${i}`);
    }
    await waitFor("globex's jobs done", async () => (await raw.count(done('globex'))) === 5);
    expect(await raw.count(work('acme')), "acme's jobs wait").to.equal(5);
    expect(await raw.count(done('acme'))).to.equal(0);
    expect(group.readiness(), 'a paused queue is not a fault').to.deep.equal({ ready: true });

    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'active', log);
    await waitFor("acme's jobs done after resume", async () => (await raw.count(done('acme'))) === 5);
    await raw.drain(done('acme'));
    await raw.drain(done('globex'));
  });

  it('drain keeps new jobs out of the queue (kept in unroutable) while the stage empties it; resume lets them in', async () => {
    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'paused', log);
    await waitFor('acme paused', () => group.runners.find((r) => r.name === 'flaky/acme')?.state === 'paused');
    await ok('acme', 'before-drain');
    await waitFor('the job queued', async () => (await raw.count(work('acme'))) === 1);
    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'draining', log);
    const told = await ok('acme', 'during-drain').catch((err: unknown) => err);
    expect(told, 'its producer is told').to.include({ code: 'UNROUTABLE', reason: 'queue-draining' });
    expect(await raw.count(names.unroutable), 'the new job is kept, not queued').to.equal(1);
    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'active', log);
    await waitFor('the queued job done', async () => (await raw.count(done('acme'))) === 1);
    await ok('acme', 'after-resume');
    await waitFor('new jobs enter again', async () => (await raw.count(done('acme'))) === 2);
    const [kept] = await raw.drain(names.unroutable);
    expect(JSON.parse(kept.content.toString()).args).to.deep.equal(['ok', 'during-drain']);
    await raw.drain(done('acme'));
  });

  it('quiet stops fetching for one stage instance; terminate stops every instance', async () => {
    await sendControl(config, { command: 'quiet', stage: 'flaky', tenant: 'globex' }, log);
    await waitFor('globex quiet', () => group.runners.find((r) => r.name === 'flaky/globex')?.state === 'quiet');
    await ok('globex', 'while-quiet');
    await ok('acme', 'acme-still-running');
    await waitFor("acme's job done", async () => (await raw.count(done('acme'))) === 1);
    expect(await raw.count(work('globex'))).to.equal(1);
    await sendControl(config, { command: 'terminate', stage: 'flaky' }, log);
    await group.terminated;
    expect(group.runners.map((r) => r.state)).to.deep.equal(['stopped', 'stopped']);
  });
});

describe('SIGTERM drains a running stage', function () {
  const stages = [{ name: 'flaky', input: 'work', outputs: ['done'] }];
  let project: ConfigFile;
  let file: string;
  let config: CompiledConfig;
  let names: BrokerNames;
  let raw: RawBroker;

  before(async () => {
    project = await writeConfigFile(
      { tenants: ['acme'], gracePeriod: 20, stages: { flaky: { module: FAILURE_STAGES_MODULE, concurrency: 3 } } },
      stages,
      'sigterm',
    );
    ({ file, config, names, raw } = project);
  });

  after(() => project.remove());

  afterEach(async () => {
    for (const q of [
      names.queue('work', 'acme'),
      names.dueQueue('work', 'acme'),
      names.suspectQueue('work', 'acme'),
      names.queue('done', 'acme'),
    ])
      await raw.drain(q);
  });

  async function publishSlow(count: number, ms: number): Promise<void> {
    const publisher = await Publisher.connect(config, { log });
    for (let i = 0; i < count; i++) await publisher.publish('work', { type: 'flaky', args: ['slow', `s-${i}`, ms], tenant: 'acme' });
    await publisher.close();
  }

  /** Ready (queue emptied into the stage's hands): three running, the rest prefetched. */
  async function startStage(): Promise<ReturnType<typeof spawnCli>> {
    const stage = spawnCli(['run', 'flaky', '--tenant', 'acme', '--config', file], { AMQP_URL, LOG_LEVEL: 'debug' });
    await waitFor('the batch taken', async () => (await raw.count(names.queue('work', 'acme'))) === 0, 15000);
    return stage;
  }

  it('finishes the jobs in flight, confirms their outputs, acknowledges them and exits 0', async () => {
    await publishSlow(5, 1500);
    const stage = await startStage();
    stage.kill('SIGTERM');
    const exit = await finished(stage, 30000, 'run flaky');
    expect(exit.code, exit.stderr).to.equal(0);
    // Three ran to completion; the two never started were handed back, unflagged, by `due`.
    expect(await raw.count(names.queue('done', 'acme'))).to.equal(3);
    expect(await raw.count(names.queue('work', 'acme'))).to.equal(0);
    expect(await raw.count(names.dueQueue('work', 'acme'))).to.equal(2);
    expect(exit.stderr).to.match(/"drained":true/);
  });

  it('on a second SIGTERM exits at once and hands every unfinished job back', async () => {
    await publishSlow(5, 60_000);
    const stage = await startStage();
    stage.kill('SIGTERM');
    await waitFor('the drain under way', () => stage.err.includes('"state":"stopping"'), 10000);
    const started = Date.now();
    stage.kill('SIGTERM');
    const exit = await finished(stage, 10000, 'run flaky');
    expect(exit.code).to.equal(1);
    expect(Date.now() - started).to.be.below(5000);
    // Nothing lost: the three in flight come back from the broker (flagged: they had started),
    // the two prefetched were handed back unstarted through `due`. A hand-back cut short by the
    // second signal may leave a copy in both places: a duplicate, never a loss.
    const back = new Map<string, number>();
    await waitFor('all five back', async () => {
      for (const queue of [names.queue('work', 'acme'), names.dueQueue('work', 'acme')]) {
        for (const m of await raw.drain(queue)) {
          const key = String((JSON.parse(m.content.toString()) as { args: unknown[] }).args[1]);
          back.set(key, (back.get(key) ?? 0) + 1);
        }
      }
      return back.size === 5;
    });
    expect([...back.keys()].sort()).to.deep.equal(['s-0', 's-1', 's-2', 's-3', 's-4']);
    expect(await raw.count(names.queue('done', 'acme'))).to.equal(0);
  });
});

describe('self-healing consumers', () => {
  const stages = [{ name: 'flaky', input: 'work', outputs: ['done'] }];
  let config: CompiledConfig;
  let names: BrokerNames;
  let loaded: LoadedStage[];
  let group: StageGroup;
  let raw: RawBroker;

  beforeEach(async () => {
    config = withTestConfig(
      { tenants: ['acme'], stages: { flaky: { module: './failure-stages.js' } } },
      path.join(here, '../fixtures/config.json'),
    );
    names = new BrokerNames(config.prefix);
    loaded = (await loadAllStages(config)).filter((s) => s.metadata.name === 'flaky');
    group = new StageGroup(config, [{ stage: loaded[0], tenant: 'acme' }], log);
    await group.start(true);
    raw = await RawBroker.connect(config.broker.url);
  });

  afterEach(async () => {
    await group.stop();
    await raw.close();
    await teardown(config, stages);
  });

  it('declares its queue again and resumes consuming when the queue is deleted under it', async () => {
    const admin = await (await import('amqplib')).default.connect(config.broker.url);
    await (await admin.createChannel()).deleteQueue(names.queue('work', 'acme'));
    await admin.close();
    await waitFor('the queue declared again', async () => (await raw.exists(names.queue('work', 'acme'))) && group.readiness().ready);
    const publisher = await Publisher.connect(config, { log });
    await publisher.publish('work', { type: 'flaky', args: ['ok', 'after-delete'], tenant: 'acme' });
    await publisher.close();
    await waitFor('the job done', async () => (await raw.count(names.queue('done', 'acme'))) === 1);
  });

  it('gives up, and says so through `failed`, when its queue cannot be declared any more', async () => {
    const admin = await (await import('amqplib')).default.connect(config.broker.url);
    const channel = await admin.createChannel();
    await channel.deleteQueue(names.queue('work', 'acme'));
    // Someone declares it again with other arguments: every declare of ours is refused.
    await channel.assertQueue(names.queue('work', 'acme'), { durable: false, arguments: { 'x-max-length': 1 } });
    await admin.close();
    const failure = await Promise.race([group.failed, new Promise<undefined>((resolve) => setTimeout(resolve, 20000, undefined))]);
    expect(failure?.message).to.match(/PRECONDITION_FAILED|inequivalent/);
    expect(group.readiness().ready).to.equal(false);
  });
});
