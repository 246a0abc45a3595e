import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { seen } from '../fixtures/failure-stages.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { HoldingProxy } from '../helpers/holding-proxy.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'unseen-redeliveries' }, 'error');
const JOBS = 400;

const CONFIG: RawConfig = {
  tenants: ['acme'],
  broker: { reconnect: { initialDelay: 0.2, maxDelay: 1 } },
  // Untracked: its jobs are acknowledged without waiting for any confirm (no emit, no report), so
  // the broker goes on sending while the proxy holds (docs/job-state.md).
  queues: { work: { tracking: false, default_retry: { max_attempts: 3, initial_interval: 'PT1S', jitter: false } } },
  stages: { flaky: { module: './failure-stages.js', concurrency: 4, prefetch: 50 } },
};

/**
 * Deliveries the broker sent into a connection that died on the way (a network cut): the process
 * never received them, and they come back flagged `redelivered`. The process lost that connection
 * while healthy, and what comes back at the head of its queue within what the broker could have
 * sent it is its own loss, not a crash: nothing is blamed (no suspect, no attempt counted).
 */
describe('deliveries lost in transit with a connection', function () {
  this.timeout(90_000);
  let config: CompiledConfig;
  let proxied: CompiledConfig;
  let names: BrokerNames;
  let flaky: LoadedStage;
  let raw: RawBroker;
  let proxy: HoldingProxy;
  let group: StageGroup | undefined;

  before(async () => {
    config = withTestConfig(CONFIG, path.join(here, '../fixtures/config.json'));
    const target = new URL(config.broker.url);
    proxy = await HoldingProxy.start({ host: target.hostname, port: Number(target.port || 5672) });
    const url = new URL(config.broker.url);
    url.port = String(proxy.port);
    proxied = { ...config, broker: { ...config.broker, url: url.toString(), urls: [url.toString()] } };
    names = new BrokerNames(config.prefix);
    flaky = (await loadAllStages(config)).find((stage) => stage.metadata.name === 'flaky') as LoadedStage;
    await declareTopologyOnce(config, provisionTopology(config, [flaky.metadata]), log);
    raw = await RawBroker.connect(config.broker.url);
  });

  after(async () => {
    await group?.stop();
    await proxy.close();
    await raw.close();
    await teardown(config, [flaky.metadata]);
  });

  it('runs what the broker sent into the dead connection as first deliveries, unblamed', async () => {
    group = new StageGroup(proxied, [{ stage: flaky, tenant: 'acme' }], log);
    await group.start();
    const publisher = await Publisher.connect(config, { log });
    try {
      for (let i = 0; i < JOBS; i++) await publisher.publish('work', { type: 'flaky', args: ['silent', `u-${i}`, 20], tenant: 'acme' });
    } finally {
      await publisher.close();
    }
    const runner = group.runners[0];
    await waitFor('a quarter done', () => runner.stats.completed >= JOBS / 4, 30_000);
    // The broker goes on sending as the acknowledgements reach it (the jobs emit nothing: no
    // confirm to wait for); none of it arrives.
    proxy.hold();
    await waitFor('deliveries on the way, never arriving', () => proxy.held > 5000, 10_000);
    proxy.cut();
    await waitFor('the group connected again', () => group?.connections === 2 && group.readiness().ready, 30_000);
    const queues = [names.queue('work', 'acme'), names.dueQueue('work', 'acme'), names.suspectQueue('work', 'acme')];
    await waitFor(
      'every job done',
      async () => runner.stats.completed >= JOBS && Object.values(await raw.counts(queues)).every((n) => n === 0),
      60_000,
    );
    const blamed = [...seen.entries()].filter(([key, runs]) => key.startsWith('u-') && runs.some((run) => run.attempt > 1));
    console.log(
      `      bytes the broker sent that never arrived: ${proxy.held}; blamed as crashes: ${runner.stats.poisonRedeliveries}, jobs run at attempt > 1: ${blamed.length}`,
    );
    expect(runner.stats.poisonRedeliveries, 'deliveries moved to the suspect queue').to.equal(0);
    expect(blamed.map(([key]) => key)).to.deep.equal([]);
  });
});
