import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { seen } from '../fixtures/failure-stages.js';
import { BrokerNode, brokerNodeUnsupported, configOnNode } from '../helpers/broker-node.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'consumer-timeout' }, (process.env.LOG_LEVEL as 'error' | undefined) ?? 'error');

/** The broker's consumer_timeout on the private node, ms, checked every CHECK_MS. */
const TIMEOUT_MS = 2000;
const CHECK_MS = 250;

/**
 * A job longer than the broker's `consumer_timeout` (docs/failures.md): the broker closes the
 * channels holding its delivery and its flow token. The process goes on (both channels open
 * again, limited jobs start), the long job ends in dead letters as CONSUMER_TIMEOUT instead of
 * running again from the start for ever, and `/readyz` says not ready while a channel is down.
 */
describe('consumer_timeout: a job longer than the broker allows (private broker node)', function () {
  this.timeout(120_000);
  let node: BrokerNode | undefined;
  let running: RunningGroup | undefined;

  before(async function () {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) {
      console.log(`      skipped: ${unsupported}`);
      this.skip();
    }
    node = await BrokerNode.start({
      name: `stagecoach-timeout-${randomBytes(3).toString('hex')}`,
      config: { consumer_timeout: TIMEOUT_MS },
      advancedConfig: `[{rabbit, [{channel_tick_interval, ${CHECK_MS}}]}].\n`,
    });
  });

  after(async () => {
    await running?.stop().catch(() => undefined);
    await node?.remove();
  });

  it('dead-letters the long job as CONSUMER_TIMEOUT, re-opens the token channel, and limited jobs start again', async () => {
    const config = configOnNode(
      node as BrokerNode,
      {
        tenants: ['acme'],
        queues: { work: { concurrency: 2 } },
        stages: { flaky: { module: './failure-stages.js', concurrency: 4 } },
      },
      path.join(here, '../fixtures/config.json'),
    );
    running = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    const { group, publisher, raw, names } = running;
    const runner = group.runners[0];
    await waitFor('ready', () => group.readiness().ready, 10_000);

    const long = `long-${Date.now()}`;
    await publisher.publish('work', { type: 'flaky', args: ['slow', long, 3 * TIMEOUT_MS], tenant: 'acme' });
    await waitFor('the long job started', () => seen.has(long), 10_000);
    // Watched from now on: not ready while the broker's close has a channel down.
    const unready: string[] = [];
    const watch = setInterval(() => {
      const readiness = group.readiness();
      if (!readiness.ready) unready.push(readiness.reason ?? '');
    }, 20);
    try {
      const dead = names.deadQueue('work', 'acme');
      await waitFor('the long job dead-lettered', async () => ((await raw.count(dead)) ?? 0) > 0, 8 * TIMEOUT_MS, 200);
      const [letter] = await raw.drain(dead);
      const job = JSON.parse((letter as { content: Buffer }).content.toString()) as Job;
      expect(job.args[1]).to.equal(long);
      expect(job.error?.type).to.equal('CONSUMER_TIMEOUT');
      expect(job.error?.message).to.match(/consumer_timeout \(2000 ms\)/);
      expect(seen.get(long)?.length, 'runs of the long job').to.equal(1);

      // Limited jobs start again: the token channel the broker closed is open again.
      const quick = Array.from({ length: 4 }, (_, i) => `quick-${i}-${Date.now()}`);
      for (const key of quick) await publisher.publish('work', { type: 'flaky', args: ['ok', key], tenant: 'acme' });
      const started = await waitFor(
        'the limited jobs done',
        async () => ((await raw.count(names.queue('done', 'acme'))) ?? 0) >= 4,
        15_000,
      ).catch(() => false);
      const ran = quick.filter((key) => seen.has(key)).length;
      expect(started, `limited jobs started after the timeout: ${ran} of 4`).to.equal(true);
      await waitFor('ready again', () => group.readiness().ready, 10_000);
    } finally {
      clearInterval(watch);
    }
    expect(unready.length, 'readiness samples not ready while a channel was down').to.be.greaterThan(0);
    expect(runner.stats.poisonRedeliveries, 'the long job taken for a crash').to.equal(0);
  });

  it('dead-letters a timed-out job that comes back to another process, instead of running it again there', async () => {
    const config = configOnNode(
      node as BrokerNode,
      { tenants: ['acme'], stages: { flaky: { module: './failure-stages.js', concurrency: 4 } } },
      path.join(here, '../fixtures/config.json'),
    );
    const first = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    let second: RunningGroup | undefined;
    try {
      await waitFor('first ready', () => first.group.readiness().ready, 10_000);
      const long = `long-elsewhere-${Date.now()}`;
      await first.publisher.publish('work', { type: 'flaky', args: ['slow', long, 3 * TIMEOUT_MS], tenant: 'acme' });
      await waitFor('the long job started in the first process', () => seen.has(long), 10_000);
      // The first process takes nothing more: the broker's timeout sends the job back to the second.
      await first.group.runners[0].quiet();
      second = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
      const dead = first.names.deadQueue('work', 'acme');
      await waitFor('the long job dead-lettered', async () => ((await first.raw.count(dead)) ?? 0) > 0, 10 * TIMEOUT_MS, 200);
      const [letter] = await first.raw.drain(dead);
      const job = JSON.parse((letter as { content: Buffer }).content.toString()) as Job;
      expect(job.args[1]).to.equal(long);
      expect(job.error?.type).to.equal('CONSUMER_TIMEOUT');
      expect(seen.get(long)?.length, 'runs of the long job').to.equal(1);
    } finally {
      await second?.stop().catch(() => undefined);
      await first.stop().catch(() => undefined);
    }
  });
});
