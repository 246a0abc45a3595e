import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { EventPublisher } from '../../src/events/event-publisher.js';
import { createLogger } from '../../src/logging/logger.js';
import { provisionBroker } from '../../src/plan/provision-broker.js';
import { retireTenant } from '../../src/removal/retire-tenant.js';
import { sendControl } from '../../src/control/send-control.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { pooled } from '../fixtures/pooled-stages.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { createPooledThreadedHandler } from '../../src/stage/threads/threaded-handler.js';
import { finished, REPO_ROOT, runCli, spawnCli } from '../helpers/cli.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { writeConfigFile } from '../helpers/config-file.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'pooled' }, 'error');
const SOURCE = path.join(here, '../fixtures/config.json');

function configWith(raw: Partial<RawConfig>, concurrency: number): CompiledConfig {
  return withTestConfig({ stages: { sleeper: { module: './pooled-stages.js', concurrency } }, ...raw }, SOURCE);
}

async function sleeperOf(config: CompiledConfig): Promise<LoadedStage> {
  return (await loadAllStages(config)).find((stage) => stage.metadata.name === 'sleeper') as LoadedStage;
}

/** A pooled group of the sleeper stage over `tenants`; it declares what its tenants need, as `run` does. */
async function pooledGroup(config: CompiledConfig, tenants: string[], follow = false): Promise<StageGroup> {
  const stage = await sleeperOf(config);
  const group = new StageGroup(
    config,
    tenants.map((tenant) => ({ stage, tenant })),
    log,
    { pooled: { stage, follow, resyncMs: 60_000 } },
  );
  await group.start();
  return group;
}

async function publishNaps(config: CompiledConfig, tenant: string, count: number, ms: number): Promise<void> {
  const publisher = await Publisher.connect(config, { log });
  try {
    await Promise.all(Array.from({ length: count }, () => publisher.publish('naps', { type: 'nap', args: [ms], tenant })));
  } finally {
    await publisher.close();
  }
}

/** Publishes every tenant's naps on one connection, interleaved, as fast as confirms allow. */
async function publishMany(config: CompiledConfig, batches: Array<{ tenant: string; count: number; ms: number }>): Promise<void> {
  const publisher = await Publisher.connect(config, { log });
  try {
    const sends: Array<Promise<unknown>> = [];
    for (let i = 0; i < Math.max(...batches.map((b) => b.count)); i++) {
      for (const { tenant, count, ms } of batches)
        if (i < count) sends.push(publisher.publish('naps', { type: 'nap', args: [ms], tenant }));
    }
    await Promise.all(sends);
  } finally {
    await publisher.close();
  }
}

describe('pooled stage processes (run --tenants / --all-tenants)', function () {
  this.timeout(90_000);
  let config: CompiledConfig;
  let group: StageGroup | undefined;

  beforeEach(() => pooled.reset());

  afterEach(async () => {
    await group?.stop();
    group = undefined;
    await teardown(
      config,
      (await loadAllStages(config)).map((stage) => stage.metadata),
    );
  });

  it('serves many tenants on one connection and few channels, one stage instance per tenant', async () => {
    const tenants = Array.from({ length: 150 }, (_, i) => `t${i}`);
    config = configWith({ tenants }, 4);
    group = await pooledGroup(config, tenants);
    expect(group.readiness()).to.deep.equal({ ready: true });
    expect(group.connections).to.equal(1);
    // publisher, suspects, and a work channel per 100 tenants
    expect(group.pool?.channels).to.equal(4);
    await Promise.all(['t0', 't77', 't149'].map((tenant) => publishNaps(config, tenant, 3, 1)));
    await waitFor('every job run', () => pooled.runs.length === 9);
    expect([...pooled.built.entries()].sort()).to.deep.equal([
      ['t0', 1],
      ['t149', 1],
      ['t77', 1],
    ]);
    expect(pooled.built.size, 'instances are built at a tenant’s first job, not for idle tenants').to.equal(3);

    // A job is counted completed once it is settled (its tracking report and ack), a little after its handler ran.
    const completed = 'stagecoach_jobs_completed_total{stage="sleeper",queue="naps",tenant="t77"} 3';
    await waitFor('t77 counted completed', async () => (await (group as StageGroup).metrics.text()).includes(completed));
    const metrics = await group.metrics.text();
    expect(metrics).to.contain('stagecoach_consuming{stage="sleeper",queue="naps",tenant="t149"} 1');
    // Depths are read in the background (QueueDepthCache): the first reading may still be under way.
    await waitFor(
      "t0's depth read",
      async () => (await (group as StageGroup).metrics.text()).includes('stagecoach_queue_depth{stage="sleeper",queue="naps",tenant="t0"'),
      25_000,
    );

    // One tenant's queue deleted under it: readiness names it among 150, then it heals alone.
    const raw = await RawBroker.connect(config.broker.url);
    try {
      await raw.deleteQueue(new BrokerNames(config.prefix).queue('naps', 't5'));
      const down = await waitFor('t5 not consuming', () => {
        const readiness = (group as StageGroup).readiness();
        return readiness.ready ? false : readiness;
      });
      expect(down.reason).to.equal('not consuming (1 of 150): sleeper/t5');
      await waitFor('t5 consuming again', () => (group as StageGroup).readiness().ready);
      await publishNaps(config, 't5', 1, 1);
      await waitFor("t5's job run", () => pooled.runs.some((run) => run.tenant === 't5'));
    } finally {
      await raw.close();
    }
  });

  it('gives quiet tenants their share while one tenant floods the queue', async () => {
    const quiet = ['q1', 'q2', 'q3', 'q4', 'q5'];
    config = configWith({ tenants: ['flood', ...quiet] }, 4);
    group = await pooledGroup(config, ['flood', ...quiet]);
    await publishNaps(config, 'flood', 400, 2);
    await waitFor('the flood running', () => pooled.runs.length >= 10);
    await publishMany(
      config,
      quiet.map((tenant) => ({ tenant, count: 20, ms: 2 })),
    );
    await waitFor('every job run', () => pooled.runs.length === 500, 60_000);
    const quietRuns = pooled.runs.filter((run) => run.tenant !== 'flood');
    const quietStart = Math.min(...quietRuns.map((run) => run.start));
    const quietDone = Math.max(...quietRuns.map((run) => run.end));
    const floodMeanwhile = pooled.runs.filter((run) => run.tenant === 'flood' && run.start >= quietStart && run.start <= quietDone).length;
    // Equal weights: while all six are busy the flood gets a sixth of the slots, so it runs
    // about 20 jobs while the quiet tenants run their 100 (first come, first served: 400).
    expect(floodMeanwhile, 'flood jobs started while the quiet tenants had work').to.be.below(50);
    expect(pooled.runs.filter((run) => run.tenant === 'flood')).to.have.length(400);
  });

  it('never runs more jobs of a tenant at once than its max_concurrency', async () => {
    config = configWith({ tenants: [{ name: 'capped', max_concurrency: 2 }, 'free'] }, 6);
    group = await pooledGroup(config, ['capped', 'free']);
    await Promise.all([publishNaps(config, 'capped', 30, 20), publishNaps(config, 'free', 30, 20)]);
    await waitFor('every job run', () => pooled.runs.length === 60, 30_000);
    expect(pooled.peak.get('capped')).to.equal(2);
    expect(pooled.peak.get('free'), 'the other tenant takes the slots the capped one may not').to.be.at.least(3);
  });

  it('holds min_concurrency slots for a tenant among flooding tenants of the same weight (3 of 6, not 1)', async () => {
    const flood = ['f1', 'f2', 'f3', 'f4', 'f5'];
    config = configWith({ tenants: [{ name: 'guaranteed', min_concurrency: 3 }, ...flood] }, 6);
    group = await pooledGroup(config, ['guaranteed', ...flood]);
    await publishMany(
      config,
      flood.map((tenant) => ({ tenant, count: 40, ms: 100 })),
    );
    await waitFor('the flood holding every slot', () => [...pooled.active.values()].reduce((a, b) => a + b, 0) === 6);
    await publishNaps(config, 'guaranteed', 24, 100);
    await waitFor('every job run', () => pooled.runs.length === 224, 60_000);
    const mine = pooled.runs.filter((run) => run.tenant === 'guaranteed').sort((a, b) => a.start - b.start);
    const floodLastStart = Math.max(...pooled.runs.filter((run) => run.tenant !== 'guaranteed').map((run) => run.start));
    // Its jobs running when each of its jobs started (that one included), once it reached its minimum, while the flood had work.
    const held = mine
      .slice(3)
      .filter((run) => run.start < floodLastStart)
      .map((run) => mine.filter((other) => other.start <= run.start && run.start < other.end).length);
    expect(held.length, 'its jobs started while the flood had work').to.be.at.least(10);
    expect(held.reduce((a, b) => a + b, 0) / held.length, 'its mean concurrency').to.be.at.least(2.5);
    expect(pooled.peak.get('guaranteed'), 'no more than its minimum: its weighted share is 1').to.equal(3);
  });

  it("refuses a pooled process whose tenants' minimums add up to more than the stage's concurrency, naming the key", async () => {
    config = configWith({ tenants: [{ name: 'a', min_concurrency: 3 }, { name: 'b', min_concurrency: 2 }, 'c'] }, 4);
    const stage = await sleeperOf(config);
    const refused = (tenants: string[], follow = false): unknown => {
      try {
        new StageGroup(
          config,
          tenants.map((tenant) => ({ stage, tenant })),
          log,
          { pooled: { stage, follow } },
        );
        return undefined;
      } catch (err) {
        return err;
      }
    };
    expect(refused(['a', 'b'])).to.include({ code: 'INVALID_CONFIG', key: 'stages.sleeper.concurrency' });
    expect(refused([], true), '--all-tenants: every configured tenant may join').to.include({ key: 'stages.sleeper.concurrency' });
  });

  it('with --all-tenants, serves a tenant provisioned while it runs within 5 s and releases it when retired', async () => {
    config = configWith({ tenants: ['acme'] }, 2);
    group = await pooledGroup(config, [], true);
    expect(group.tenants).to.deep.equal(['acme']);
    const stage = await sleeperOf(config);
    const events = new EventPublisher(config, { source: 'stagecoach/test', log });
    try {
      await provisionBroker(config, [stage.metadata], log, { tenant: 'newco', onEvent: events.sink });
      const provisioned = Date.now();
      await publishNaps(config, 'newco', 1, 1);
      await waitFor("newco's job run", () => pooled.runs.some((run) => run.tenant === 'newco'), 5000);
      expect(Date.now() - provisioned).to.be.below(5000);
      expect(group.tenants).to.include('newco');

      // As with a container per tenant: the stages reading it stop first, then it is retired.
      await sendControl(config, { command: 'terminate', tenant: 'newco' }, log);
      await waitFor('newco released', () => !group?.tenants.includes('newco'), 5000);
      const raw = await RawBroker.connect(config.broker.url);
      try {
        await waitFor(
          'no consumer of newco',
          async () => (await raw.consumers(new BrokerNames(config.prefix).queue('naps', 'newco'))) === 0,
        );
        await retireTenant(config, 'newco', log, { strategy: 'discard', onEvent: events.sink });
        expect(await raw.exists(new BrokerNames(config.prefix).queue('naps', 'newco')), 'a retired tenant’s queue stays gone').to.equal(
          false,
        );
      } finally {
        await raw.close();
      }
      expect(group.readiness().ready).to.equal(true);
    } finally {
      await events.close();
    }
  });

  it('runs every tenant in one pool of worker threads, each job in its own tenant’s stage instance', async () => {
    config = withTestConfig(
      { tenants: ['acme', 'globex'], stages: { relay: { module: './test-stages.js', concurrency: 4, threads: 2 } } },
      SOURCE,
    );
    const relay = (await loadAllStages(config)).find((stage) => stage.metadata.name === 'relay') as LoadedStage;
    const threads = await createPooledThreadedHandler({ stage: relay, config, variant: undefined, threads: 2, log });
    group = new StageGroup(
      config,
      ['acme', 'globex'].map((tenant) => ({ stage: relay, tenant })),
      log,
      { pooled: { stage: relay, threads } },
    );
    const raw = await RawBroker.connect(config.broker.url);
    try {
      // The output queues, which only their own consumers or `provision` declare.
      await declareTopologyOnce(config, provisionTopology(config, [relay.metadata]), log);
      await group.start();
      const publisher = await Publisher.connect(config, { log });
      try {
        for (const tenant of ['acme', 'globex']) {
          for (let i = 0; i < 5; i++) await publisher.publish('in', { type: 'relay.me', args: [`${tenant}-${i}`], tenant });
        }
      } finally {
        await publisher.close();
      }
      const names = new BrokerNames(config.prefix);
      for (const tenant of ['acme', 'globex']) {
        await waitFor(`${tenant}'s jobs relayed`, async () => (await raw.count(names.queue('out', tenant))) === 5);
        const relayed = (await raw.drain(names.queue('out', tenant))).map(
          (m) => (JSON.parse(m.content.toString()) as { args: string[] }).args[0],
        );
        expect(relayed.sort()).to.deep.equal([0, 1, 2, 3, 4].map((i) => `${tenant}-${i}@${tenant}`));
      }
    } finally {
      await raw.close();
      await threads.close();
    }
  });

  it('refuses --tenants with --tenant, with --all-tenants, a bad slug, a shared input, and security.tenantUsers (exit 2)', async () => {
    config = configWith({ tenants: ['a'] }, 1);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-pooled-'));
    try {
      const file = async (raw: Record<string, unknown>): Promise<string> => {
        const at = path.join(dir, `${Object.keys(raw).join('-')}.json`);
        await writeFile(
          at,
          JSON.stringify({
            prefix: config.prefix,
            stages: { sleeper: { module: path.join(REPO_ROOT, 'dist/test/fixtures/pooled-stages.js') } },
            ...raw,
          }),
        );
        return at;
      };
      const plain = await file({});
      const cases: Array<[string[], RegExp]> = [
        [['--tenants', 'a', '--tenant', 'a', '--config', plain], /--tenant goes without --tenants/],
        [['--tenants', 'a', '--all-tenants', '--config', plain], /exclude each other/],
        [['--tenants', 'a,Bad.Slug', '--config', plain], /--tenants/],
        [['--all-tenants', '--config', await file({ queues: { naps: { scope: 'shared' } } })], /reads a shared queue/],
        [['--all-tenants', '--config', await file({ security: { tenantUsers: true } })], /one process per tenant/],
      ];
      for (const [args, message] of cases) {
        const result = await runCli(['run', 'sleeper', ...args]);
        expect(result.code, args.join(' ')).to.equal(2);
        expect(result.stderr, args.join(' ')).to.match(message);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('drains every tenant on SIGTERM and exits 0 (stagecoach run --tenants)', async () => {
    config = configWith({ tenants: ['a', 'b', 'c'] }, 3);
    const stage = await sleeperOf(config);
    const file = await writeConfigFile(
      {
        tenants: ['a', 'b', 'c'],
        stages: { sleeper: { module: path.join(REPO_ROOT, 'dist/test/fixtures/pooled-stages.js'), concurrency: 3 } },
      },
      [stage.metadata],
      'pooled',
    );
    config = file.config;
    const child = spawnCli(['run', 'sleeper', '--tenants', 'a,b,c', '--config', file.file, '--http-port', '0']);
    try {
      await waitFor('consuming', () => /tenants consuming/.test(child.err), 20_000);
      for (const tenant of ['a', 'b', 'c']) await publishNaps(config, tenant, 1, 1500);
      await waitFor('every job taken', async () => {
        for (const tenant of ['a', 'b', 'c']) if ((await file.raw.count(file.names.queue('naps', tenant))) !== 0) return false;
        return true;
      });
      child.kill('SIGTERM');
      const exit = await finished(child, 20_000, 'run --tenants');
      expect(exit.code, exit.stderr).to.equal(0);
      // Drained means finished and acknowledged: nothing went back to the queues.
      for (const tenant of ['a', 'b', 'c']) expect(await file.raw.count(file.names.queue('naps', tenant)), tenant).to.equal(0);
      const stopped = exit.stderr.split('\n').filter((line) => line.includes('"message":"stage stopped"'));
      expect(stopped, exit.stderr).to.have.length(3);
      expect(
        stopped.every((line) => line.includes('"drained":true')),
        stopped.join('\n'),
      ).to.equal(true);
    } finally {
      child.kill('SIGKILL');
      await file.remove();
    }
  });
});
