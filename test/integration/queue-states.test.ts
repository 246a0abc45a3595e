import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { expect } from 'chai';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import { compileConfig } from '../../src/config/compile-config.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { BrokerNode, brokerNodeUnsupported } from '../helpers/broker-node.js';
import { runCli } from '../helpers/cli.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';
import { FAILURE_STAGES_MODULE } from '../helpers/config-file.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'queue-states' }, 'error');
const TENANTS = ['acme', 'globex', 'initech'];
const INSTANCES = TENANTS.map((tenant) => ({ stage: 'flaky', tenant }));

/** Consumers of a queue, as the broker counts them. */
async function consumers(url: string, queue: string): Promise<number> {
  const connection = await amqplib.connect(url);
  try {
    const channel = await connection.createChannel();
    return (await channel.checkQueue(queue)).consumerCount;
  } finally {
    await connection.close();
  }
}

/**
 * What a held state looks like from outside, with initech (active) as the witness that the
 * stages run: acme is paused (its jobs wait, nobody consumes it), globex drains (its new jobs are
 * kept in unroutable, not queued).
 */
async function expectHeldStates(config: CompiledConfig, group: StageGroup, raw: RawBroker, tag: string): Promise<void> {
  const names = new BrokerNames(config.prefix);
  const runner = (tenant: string) => group.runners.find((r) => r.tenant === tenant);
  await waitFor('acme paused', () => runner('acme')?.state === 'paused');
  await waitFor('initech consuming', () => group.readiness().ready && runner('initech')?.state === 'running');
  expect(await consumers(config.broker.url, names.queue('work', 'acme')), 'nobody consumes the paused queue').to.equal(0);
  const publisher = await Publisher.connect(config, { log });
  try {
    for (const tenant of TENANTS) {
      for (let i = 0; i < 3; i++) {
        const sent = publisher.publish('work', { type: 'flaky', args: ['ok', `${tag}-${tenant}-${i}`], tenant });
        // The producer of a job for the draining queue is told where it went.
        if (tenant === 'globex')
          expect(
            await sent.then(
              () => undefined,
              (err: unknown) => err,
            ),
          ).to.include({ reason: 'queue-draining' });
        else await sent;
      }
    }
  } finally {
    await publisher.close();
  }
  await waitFor("initech's jobs done", async () => (await raw.count(names.queue('done', 'initech'))) === 3);
  expect(await raw.count(names.queue('work', 'acme')), "acme's jobs wait in its paused queue").to.equal(3);
  expect(await raw.count(names.queue('done', 'acme'))).to.equal(0);
  expect(await raw.count(names.queue('work', 'globex')), "globex's draining queue takes no new job").to.equal(0);
  const kept = await raw.drain(names.unroutable);
  expect(kept.map((m) => (JSON.parse(m.content.toString()) as { args: string[] }).args[1]).sort()).to.deep.equal(
    [0, 1, 2].map((i) => `${tag}-globex-${i}`),
  );
  await raw.drain(names.queue('done', 'initech'));
}

async function newGroup(config: CompiledConfig, stages: LoadedStage[]): Promise<StageGroup> {
  const flaky = stages.find((s) => s.metadata.name === 'flaky') as LoadedStage;
  const group = new StageGroup(
    config,
    TENANTS.map((tenant) => ({ stage: flaky, tenant })),
    log,
  );
  await group.start(true);
  return group;
}

describe('queue states are kept on the broker', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let running: RunningGroup;
  let restarted: StageGroup | undefined;

  before(async () => {
    config = withTestConfig(
      { tenants: TENANTS, stages: { flaky: { module: './failure-stages.js', concurrency: 2 } } },
      path.join(here, '../fixtures/config.json'),
    );
    running = await startGroup(config, INSTANCES, log);
  });

  after(async () => {
    await restarted?.stop();
    await running.stop();
  });

  it('pause and drain hold across a stage restart and provision; resume ends both', async () => {
    const { raw, names, stages } = running;
    const states = await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'paused', log);
    expect(states).to.deep.equal([{ queue: 'work', tenant: 'acme', physicalQueue: names.queue('work', 'acme'), state: 'paused' }]);
    await setQueueState(config, { queue: 'work', tenant: 'globex' }, 'draining', log);
    await waitFor('acme paused in the running group', () => running.group.runners.find((r) => r.tenant === 'acme')?.state === 'paused');

    // The group stops and another starts (and provisions: it declares every entry binding).
    await running.group.stop();
    restarted = await newGroup(config, stages);
    await declareTopologyOnce(
      config,
      provisionTopology(
        config,
        stages.map((s) => s.metadata),
      ),
      log,
    );
    await expectHeldStates(config, restarted, raw, 'restart');

    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'active', log);
    await setQueueState(config, { queue: 'work', tenant: 'globex' }, 'active', log);
    await waitFor("acme's waiting jobs done once resumed", async () => (await raw.count(names.queue('done', 'acme'))) === 3);
    await running.publisher.publish('work', { type: 'flaky', args: ['ok', 'after-resume'], tenant: 'globex' });
    await waitFor("globex's queue takes jobs again", async () => (await raw.count(names.queue('done', 'globex'))) === 1);
    expect(await raw.count(names.unroutable)).to.equal(0);
    for (const tenant of TENANTS) await raw.drain(names.queue('done', tenant));
  });

  it('is set and shown on the command line; refuses a drain of one variant and a tenant on a shared queue', async () => {
    // The running group's own prefix: the commands act on its queues.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-states-'));
    const file = path.join(dir, 'stagecoach.json');
    await writeFile(
      file,
      JSON.stringify({ prefix: config.prefix, durable: false, tenants: TENANTS, stages: { flaky: { module: FAILURE_STAGES_MODULE } } }),
    );
    try {
      const paused = await runCli(['pause', 'work', '--tenant', 'acme', '--config', file]);
      expect(paused.code, paused.stderr).to.equal(0);
      expect(paused.stdout).to.equal(`${running.names.queue('work', 'acme')} paused\n`);
      await waitFor('acme paused', () => restarted?.runners.find((r) => r.tenant === 'acme')?.state === 'paused');
      const resumed = await runCli(['resume', 'work', '--config', file]);
      expect(resumed.code, resumed.stderr).to.equal(0);
      expect(resumed.stdout.trim().split('\n')).to.deep.equal(TENANTS.map((t) => `${running.names.queue('work', t)} active`));
      await waitFor('acme running again', () => restarted?.runners.find((r) => r.tenant === 'acme')?.state === 'running');
      const variant = await runCli(['drain', 'work', '--tenant', 'acme', '--variant', 'pdf', '--config', file]);
      expect(variant.code).to.equal(2);
      expect(variant.stderr).to.contain('no variant "pdf"');
      const unknown = await runCli(['pause', 'work', '--tenant', 'nosuch', '--config', file]);
      expect(unknown.code).to.equal(2);
      expect(unknown.stderr).to.contain('tenant "nosuch" is neither configured nor provisioned');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('queue states survive a broker restart (private broker node)', function () {
  this.timeout(180_000);
  let node: BrokerNode | undefined;
  let group: StageGroup | undefined;
  let raw: RawBroker | undefined;
  let config: CompiledConfig;

  before(async function () {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) {
      console.log(`      skipped: ${unsupported}`);
      this.skip();
    }
    node = await BrokerNode.start({ name: `stagecoach-states-${randomBytes(3).toString('hex')}` });
    config = compileConfig(
      {
        prefix: `test-${randomBytes(4).toString('hex')}`,
        // A broker restart keeps durable exchanges only: the markers are as durable as the queues.
        durable: true,
        broker: { url: node.url, management: 'http://guest:guest@127.0.0.1:1/' },
        tenants: TENANTS,
        stages: { flaky: { module: './failure-stages.js', concurrency: 2 } },
      },
      path.join(here, '../fixtures/config.json'),
    );
    group = await newGroup(config, await loadAllStages(config));
    raw = await RawBroker.connect(config.broker.url);
  });

  after(async () => {
    await group?.stop();
    await raw?.close().catch(() => undefined);
    await node?.remove();
  });

  it('pause and drain hold after the broker restarts and the stages reconnect', async () => {
    const n = node as BrokerNode;
    const g = group as StageGroup;
    await setQueueState(config, { queue: 'work', tenant: 'acme' }, 'paused', log);
    await setQueueState(config, { queue: 'work', tenant: 'globex' }, 'draining', log);
    await waitFor('acme paused', () => g.runners.find((r) => r.tenant === 'acme')?.state === 'paused');
    await raw?.close();

    const before = g.connections;
    await n.stopApp();
    await n.startApp();
    await waitFor('the group reconnected', () => g.connections > before && g.readiness().ready, 60_000);
    raw = await RawBroker.connect(config.broker.url);
    await expectHeldStates(config, g, raw, 'broker-restart');
  });
});
