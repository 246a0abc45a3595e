import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { seen } from '../fixtures/failure-stages.js';
import { BrokerNode, brokerNodeUnsupported, configOnNode } from '../helpers/broker-node.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'forced-close-blame' }, (process.env.LOG_LEVEL as 'error' | undefined) ?? 'error');

const JOBS = 120;

/**
 * Two live processes consume one queue; the broker closes every connection
 * (`close_all_connections`). Each gets back, redelivered, deliveries the other held: neither
 * process died, so none of them is a crash's (docs/failures.md): the process that lost them says
 * so (an `excuse` control message), and nothing is moved to the suspect queue, no attempt counted.
 */
describe('closed connections: no innocent job blamed as a crash (private broker node)', function () {
  this.timeout(180_000);
  let node: BrokerNode | undefined;
  let running: RunningGroup | undefined;
  let second: StageGroup | undefined;

  before(async function () {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) {
      console.log(`      skipped: ${unsupported}`);
      this.skip();
    }
    node = await BrokerNode.start({ name: `stagecoach-blame-${randomBytes(3).toString('hex')}` });
  });

  after(async () => {
    await second?.stop().catch(() => undefined);
    await running?.stop().catch(() => undefined);
    await node?.remove();
  });

  it('counts no suspect and no extra attempt among the jobs two live processes held', async () => {
    const config = configOnNode(
      node as BrokerNode,
      {
        tenants: ['acme'],
        broker: { reconnect: { initialDelay: 0.2, maxDelay: 1 } },
        stages: { flaky: { module: './failure-stages.js', concurrency: 3 } },
      },
      path.join(here, '../fixtures/config.json'),
    );
    running = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    const stage = (await loadAllStages(config)).find((s) => s.metadata.name === 'flaky');
    second = new StageGroup(config, [{ stage: stage as NonNullable<typeof stage>, tenant: 'acme' }], log);
    await second.start();
    const { group, publisher, names } = running;
    const groups = [group, second];

    const run = `b${Date.now()}`;
    const keys = Array.from({ length: JOBS }, (_, i) => `${run}-${i}`);
    for (const key of keys) await publisher.publish('work', { type: 'flaky', args: ['slow', key, 500], tenant: 'acme' });
    // Both processes busy, with jobs prefetched and not started.
    await waitFor('both processes running jobs', () => groups.every((g) => g.runners[0].inFlight > 0) && seen.size > 0, 15_000);
    await (node as BrokerNode).ctl(['close_all_connections', 'test: forced close']);
    // The test's own clients went too.
    const raw = await RawBroker.connect((node as BrokerNode).url);

    const done = names.queue('done', 'acme');
    await waitFor(
      'every job done',
      async () => keys.every((key) => seen.has(key)) && ((await raw.count(done)) ?? 0) >= JOBS,
      90_000,
      200,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${keys.filter((key) => seen.has(key)).length} of ${JOBS} ran`);
    });
    await raw.close();
    const blamed = groups.reduce((sum, g) => sum + g.runners[0].stats.poisonRedeliveries, 0);
    const counted = keys.filter((key) => (seen.get(key) ?? []).some((entry) => entry.attempt > 1)).length;
    console.log(`      blamed as crashes: ${blamed} moved to suspects, ${counted} of ${JOBS} jobs ran with an attempt counted`);
    expect(blamed, 'deliveries moved to the suspect queue').to.equal(0);
    expect(counted, 'jobs run with an attempt counted').to.equal(0);
  });
});
