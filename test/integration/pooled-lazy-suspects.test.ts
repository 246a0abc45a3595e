import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { retireTenant } from '../../src/removal/retire-tenant.js';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { provisionBroker } from '../../src/plan/provision-broker.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { seen } from '../fixtures/failure-stages.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const CONFIG: RawConfig = {
  tenants: ['acme'],
  stages: { flaky: { module: './failure-stages.js', concurrency: 4 } },
};

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'pooled-lazy-suspects' }, 'error');

/**
 * Issue 27: a pooled process following the broker (`run --all-tenants`) declares no suspect
 * queue of a tenant found provisioned when it starts (20,000 declarations at 10,000 tenants);
 * the suspect queue is declared when a job redelivered after a crash is first moved there.
 */
describe('pooled --all-tenants: suspect queues declared on first use', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let names: BrokerNames;
  let flaky: LoadedStage;
  let raw: RawBroker;
  let group: StageGroup | undefined;

  before(async () => {
    config = withTestConfig(CONFIG, path.join(here, '../fixtures/config.json'));
    names = new BrokerNames(config.prefix);
    flaky = (await loadAllStages(config)).find((stage) => stage.metadata.name === 'flaky') as LoadedStage;
    raw = await RawBroker.connect(config.broker.url);
    // acme is configured; newco only provisioned (as `tenant provision newco` does).
    await provisionBroker(config, [flaky.metadata], log);
    await provisionBroker(config, [flaky.metadata], log, { tenant: 'newco' });
  });

  after(async () => {
    await group?.stop();
    // Retired in the test when it passes; here when it did not get that far.
    if (await raw.exists(names.queue('work', 'newco'))) await retireTenant(config, 'newco', log, { strategy: 'discard' });
    await raw.close();
    await teardown(config, [flaky.metadata]);
  });

  it('declares no suspect queue of a provisioned tenant at start; a job redelivered after a crash creates it, and runs there', async () => {
    group = new StageGroup(config, [], log, { pooled: { stage: flaky, follow: true, resyncMs: 60_000 } });
    await group.start();
    expect(group.tenants).to.deep.equal(['acme', 'newco']);
    expect(await raw.exists(names.suspectQueue('work', 'newco'))).to.equal(false);
    // The configured tenant's suspect queue is declared at start, as before (it may have no `provision` behind it).
    expect(await raw.exists(names.suspectQueue('work', 'acme'))).to.equal(true);

    // Paused, so that a process that took newco's job and died before settling it can be played:
    // the broker redelivers the job flagged.
    const newco = (): string | undefined => group?.runners.find((runner) => runner.tenant === 'newco')?.state;
    await setQueueState(config, { queue: 'work', tenant: 'newco' }, 'paused', log);
    await waitFor('newco paused', () => newco() === 'paused');
    const publisher = await Publisher.connect(config, { log });
    try {
      await publisher.publish('work', { type: 'flaky', args: ['ok', 'lazy-suspect'], tenant: 'newco' });
    } finally {
      await publisher.close();
    }
    await raw.takeAndDrop(names.queue('work', 'newco'), 1);
    expect(await raw.exists(names.suspectQueue('work', 'newco'))).to.equal(false);
    await setQueueState(config, { queue: 'work', tenant: 'newco' }, 'active', log);

    await waitFor('the suspect run and done', async () => (await raw.count(names.queue('done', 'newco'))) === 1, 20_000);
    // Moved to the suspect queue (declared then) and run there: the crash counted, attempt 2.
    expect(seen.get('lazy-suspect')?.map((s) => s.attempt)).to.deep.equal([2]);
    expect(await raw.count(names.suspectQueue('work', 'newco'))).to.equal(0);
    expect(await raw.count(names.deadQueue('work', 'newco'))).to.equal(0);
    await raw.drain(names.queue('done', 'newco'));

    // Retiring the tenant removes its suspect queue with the rest.
    await group.stop();
    group = undefined;
    await retireTenant(config, 'newco', log, { strategy: 'discard' });
    expect(await raw.exists(names.suspectQueue('work', 'newco'))).to.equal(false);
    expect(await raw.exists(names.queue('work', 'newco'))).to.equal(false);
  });

  it('a provisioned tenant without a crash still has no suspect queue after start', async () => {
    await provisionBroker(config, [flaky.metadata], log, { tenant: 'initech' });
    try {
      group = new StageGroup(config, [], log, { pooled: { stage: flaky, follow: true, resyncMs: 60_000 } });
      await group.start();
      expect(group.tenants).to.include('initech');
      expect(await raw.exists(names.suspectQueue('work', 'initech'))).to.equal(false);
      // Its watch asked about the missing queue and the process goes on serving: a job runs.
      const publisher = await Publisher.connect(config, { log });
      try {
        await publisher.publish('work', { type: 'flaky', args: ['ok', 'lazy-plain'], tenant: 'initech' });
      } finally {
        await publisher.close();
      }
      await waitFor('initech’s job done', async () => (await raw.count(names.queue('done', 'initech'))) === 1, 20_000);
      expect(await raw.exists(names.suspectQueue('work', 'initech'))).to.equal(false);
      expect(group.readiness().ready).to.equal(true);
    } finally {
      await group?.stop();
      group = undefined;
      await retireTenant(config, 'initech', log, { strategy: 'discard' });
    }
    expect(await raw.exists(names.queue('work', 'initech')), 'retired without a suspect queue').to.equal(false);
  });
});
