import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { toWire } from '../../src/job/amqp-mapping.js';
import { createJob } from '../../src/job/envelope.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import type { StageRunner } from '../../src/runner/stage-runner.js';
import { sendControl } from '../../src/control/send-control.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { DELAY_LEVELS } from '../../src/topology/delay-topology.js';
import { lateEmits, seen } from '../fixtures/failure-stages.js';
import { closeConnections } from '../helpers/broker-admin.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'settlement-faults' }, 'error');

/**
 * The settlement under faults, one test per defect it used to have: each fails on the runner
 * before the reshape (one settlement path, channels healed one by one, suspects run alone).
 */
describe('settlement under faults', function () {
  this.timeout(60_000);
  let running: RunningGroup | undefined;
  let key = 0;
  const nextKey = (what: string): string => `${what}-${++key}-${Date.now()}`;

  afterEach(async () => {
    await running?.stop();
    running = undefined;
  });

  async function start(
    queues: RawConfig['queues'],
    concurrency = 4,
  ): Promise<RunningGroup & { runner: StageRunner; config: CompiledConfig }> {
    const config = withTestConfig(
      { tenants: ['acme'], queues, stages: { flaky: { module: './failure-stages.js', concurrency } } },
      path.join(here, '../fixtures/config.json'),
    );
    running = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    return { ...running, runner: running.group.runners[0], config };
  }

  const publish = (publisher: Publisher, mode: string, k: string, n?: unknown): Promise<string> =>
    publisher.publish('work', { type: 'flaky', args: n === undefined ? [mode, k] : [mode, k, n], tenant: 'acme' });

  it('keeps a retry whose queue filled up while it waited: it waits in `due`, not dropped by the broker (defect 1)', async () => {
    const { group, publisher, raw, names, config, runner } = await start({
      work: { max_size: 2, default_retry: { max_attempts: 3, initial_interval: 'PT2S', jitter: false } },
    });
    const retried = nextKey('retried');
    await publish(publisher, 'fail-times', retried, 1);
    await waitFor('the retry scheduled', () => runner.stats.retried === 1, 10_000);
    await group.stop();
    // The queue fills up (max_size 2, overflow reject) while the failed job waits 2 s.
    await publish(publisher, 'ok', nextKey('filler'));
    await publish(publisher, 'ok', nextKey('filler'));
    expect(await raw.count(names.queue('work', 'acme'))).to.equal(2);

    const everywhere = [
      names.queue('work', 'acme'),
      names.dueQueue('work', 'acme'),
      names.suspectQueue('work', 'acme'),
      names.deadQueue('work', 'acme'),
      names.unroutable,
      ...Array.from({ length: DELAY_LEVELS }, (_, level) => names.delayLevel(level)),
    ];
    const total = async (): Promise<number> => {
      const counts = await raw.counts(everywhere);
      return Object.values(counts).reduce<number>((sum, n) => sum + (n ?? 0), 0);
    };
    // While it waits it is in the ladder; once its wait is over it must still be somewhere.
    await waitFor(
      'the wait over',
      async () => (await raw.count(names.delayLevel(1))) === 0 && (await raw.count(names.delayLevel(0))) === 0,
      10_000,
    );
    await waitFor('the retried job kept somewhere', async () => (await total()) === 3, 5_000);
    expect(await raw.count(names.dueQueue('work', 'acme'))).to.equal(1);

    // A new stage takes all three: the retried job runs its second attempt.
    const again = await startGroup(config, [{ stage: 'flaky', tenant: 'acme' }], log);
    try {
      await waitFor('all three done', async () => (await raw.count(names.queue('done', 'acme'))) === 3, 10_000);
      const attempts = (await raw.drain(names.queue('done', 'acme'))).map((m) => (JSON.parse(m.content.toString()) as Job).args);
      expect(attempts).to.deep.include([retried, 2]);
    } finally {
      await again.group.stop();
      await again.publisher.close();
      await again.raw.close();
    }
  });

  it('retries on the healed publisher channel instead of requeueing: a lost publisher is not a crash (defect 3)', async () => {
    const { publisher, raw, names, runner } = await start({
      work: { default_retry: { max_attempts: 2, initial_interval: 'PT1S', jitter: false } },
    });
    // The retry's publish hits a missing exchange: the broker closes the publisher channel.
    await raw.deleteExchange(names.retry);
    const failing = nextKey('always');
    await publish(publisher, 'always', failing);
    await waitFor('the dead letter', async () => (await raw.count(names.deadQueue('work', 'acme'))) === 1, 20_000);
    const [letter] = await raw.drain(names.deadQueue('work', 'acme'));
    const job = JSON.parse(letter.content.toString()) as Job;
    expect(job.error?.type).to.equal('TypeError');
    // Attempt 2 came from a retry of attempt 1's failure, not from a crash redelivery.
    expect(job.meta.last_error).to.deep.equal({ type: 'TypeError', message: `always failing (${failing})` });
    expect(seen.get(failing)?.map((s) => s.attempt)).to.deep.equal([1, 2]);
    expect(runner.stats.poisonRedeliveries, 'deliveries taken for crashes').to.equal(0);
  });

  it('heals only the lost publisher channel: jobs in flight on the work channel finish once (defect 6)', async () => {
    const { publisher, raw, names, runner } = await start(
      { work: { default_retry: { max_attempts: 2, initial_interval: 'PT1S', jitter: false } } },
      5,
    );
    const slow = Array.from({ length: 4 }, () => nextKey('slow'));
    for (const k of slow) await publish(publisher, 'slow', k, 2500);
    await waitFor('the slow jobs running', () => slow.every((k) => seen.has(k)), 5_000);
    await raw.deleteExchange(names.retry);
    await publish(publisher, 'fail-times', nextKey('trigger'), 1);
    await waitFor('the slow jobs and the retried one done', async () => (await raw.count(names.queue('done', 'acme'))) === 5, 20_000);
    for (const k of slow)
      expect(
        seen.get(k)?.map((s) => s.attempt),
        k,
      ).to.deep.equal([1]);
    expect(runner.stats.poisonRedeliveries, 'deliveries taken for crashes').to.equal(0);
  });

  it('heals only the lost suspect channel when its queue is deleted: jobs in flight finish once (defect 6)', async () => {
    const { publisher, raw, names, runner } = await start({ work: {} }, 4);
    const slow = Array.from({ length: 4 }, () => nextKey('slow'));
    for (const k of slow) await publish(publisher, 'slow', k, 2500);
    await waitFor('the slow jobs running', () => slow.every((k) => seen.has(k)), 5_000);
    await raw.deleteQueue(names.suspectQueue('work', 'acme'));
    await waitFor('the slow jobs done', async () => (await raw.count(names.queue('done', 'acme'))) === 4, 20_000);
    for (const k of slow)
      expect(
        seen.get(k)?.map((s) => s.attempt),
        k,
      ).to.deep.equal([1]);
    expect(runner.stats.poisonRedeliveries, 'deliveries taken for crashes').to.equal(0);
    await waitFor('the suspect queue declared again', () => raw.exists(names.suspectQueue('work', 'acme')), 10_000);
  });

  it('does not take a connection the broker closed for a crash: the jobs in hand come back unblamed', async () => {
    const { publisher, raw, names, runner, config, group } = await start({ work: {} }, 4);
    const slow = Array.from({ length: 4 }, () => nextKey('slow'));
    // Long enough to be in hand when the close arrives: rabbitmqctl alone takes a second or two.
    for (const k of slow) await publish(publisher, 'slow', k, 8000);
    await waitFor('the slow jobs running', () => slow.every((k) => seen.has(k)), 5_000);
    expect(await closeConnections(`stagecoach flaky [${config.prefix}]`, 'test: forced close')).to.equal(1);
    await waitFor('the stage reconnected', () => group.connections === 2 && group.readiness().ready, 15_000);
    // Redelivered once the connection is back (their acks died with it). The first runs' outputs
    // may be confirmed too, on the publisher healed meanwhile: at-least-once, counted as duplicates.
    await waitFor('the slow jobs run again', () => slow.every((k) => seen.get(k)?.length === 2), 30_000);
    await waitFor('the slow jobs done', async () => ((await raw.count(names.queue('done', 'acme'))) ?? 0) >= 4, 20_000);
    // Each ran again as the first delivery it was: not a suspect, no attempt counted.
    for (const k of slow)
      expect(
        seen.get(k)?.map((s) => s.attempt),
        k,
      ).to.deep.equal([1, 1]);
    expect(runner.stats.poisonRedeliveries, 'deliveries taken for crashes').to.equal(0);
  });

  it('refuses an emit made after the handler failed, while the job is being retried (defect 4)', async () => {
    const { publisher, raw, names } = await start({ work: { default_retry: { max_attempts: 1 } } });
    const late = nextKey('late');
    await publish(publisher, 'late-emit', late);
    await waitFor('the dead letter', async () => (await raw.count(names.deadQueue('work', 'acme'))) === 1, 10_000);
    await waitFor('the late emit settled', () => lateEmits.has(late), 5_000);
    expect(lateEmits.get(late)).to.equal('INVALID_REQUEST');
    expect(await raw.count(names.queue('done', 'acme'))).to.equal(0);
  });

  it('hands back a waiting redelivered delivery as the crash it is: to the suspect queue, never unflagged to `due`', async () => {
    const { publisher, raw, names, runner, config } = await start({ work: {} }, 1);
    await runner.pause();
    // Four deliveries whose process died: taken by a consumer that closed without acknowledging.
    const due = names.dueQueue('work', 'acme');
    const crashed = Array.from({ length: 4 }, () => nextKey('crashed'));
    for (const k of crashed) {
      const job = createJob({ type: 'flaky', args: ['ok', k] }, { queue: 'work', tenant: 'acme' });
      const wire = toWire(job, { tenantHeader: config.tenantHeader });
      await raw.publish('', due, wire.content, wire.options);
    }
    await raw.takeAndDrop(due, crashed.length);
    const slow = nextKey('slow');
    await publish(publisher, 'slow', slow, 3000);
    await runner.resume();
    await waitFor('the slow job running', () => seen.has(slow), 5_000);
    // Paused while the redelivered ones wait behind the slow job: they are handed back.
    await runner.pause();
    await waitFor('all four moved to the suspect queue', async () => (await raw.count(names.suspectQueue('work', 'acme'))) === 4, 10_000);
    expect(await raw.count(due), 'none handed back unflagged').to.equal(0);
    for (const k of crashed) expect(seen.has(k), `${k} did not run`).to.equal(false);
  });

  it('makes a second stop() wait for the first: terminate, then stop, drains the job in flight (defect 5)', async () => {
    const { group, publisher, raw, names, config, runner } = await start({ work: {} });
    await publish(publisher, 'slow', nextKey('draining'), 1500);
    await waitFor('the job running', () => runner.stats.completed === 0 && [...seen.keys()].some((k) => k.startsWith('draining')), 5_000);
    await sendControl(config, { command: 'terminate' }, log);
    await waitFor('terminating', () => runner.stopping, 5_000);
    // SIGTERM after terminate: the group's stop must wait for the drain under way.
    const drained = await group.stop();
    expect(drained).to.equal(true);
    expect(await raw.count(names.queue('done', 'acme')), 'the job finished before stop() returned').to.equal(1);
    expect(await raw.count(names.queue('work', 'acme'))).to.equal(0);
    expect(runner.state).to.equal('stopped');
  });

  it('answers a second stop() of a runner with the first one promise (defect 5)', async () => {
    const { publisher, raw, names, runner } = await start({ work: {} });
    await publish(publisher, 'slow', nextKey('stop-twice'), 1000);
    await waitFor('the job running', () => [...seen.keys()].some((k) => k.startsWith('stop-twice')), 5_000);
    const first = runner.stop(10_000);
    const second = runner.stop(10_000);
    expect(second).to.equal(first);
    expect(await second).to.equal(true);
    expect(await raw.count(names.queue('done', 'acme'))).to.equal(1);
  });
});
