import { getEventListeners } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BroadcastChannel } from 'node:worker_threads';
import type { GetMessage } from 'amqplib';
import { expect } from 'chai';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { StagecoachError } from '../../src/errors/errors.js';
import type { EmitSpec, Job, JobSpec } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { DeadLetterJob, DiscardJob, RetryJob } from '../../src/retry/handler-outcomes.js';
import { StageGroup } from '../../src/runner/stage-group.js';
import { JobContext } from '../../src/stage/job-context.js';
import { loadStage, type LoadedStage } from '../../src/stage/stage-loader.js';
import type { StageContext } from '../../src/stage/stage.types.js';
import { createThreadedHandler, type ThreadedHandler } from '../../src/stage/threads/threaded-handler.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { BrokerNames } from '../../src/topology/names.js';
import { REPORTS, type Whereabouts } from '../fixtures/cpu-stages.js';
import { RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'threads' }, 'error');
const body = (m: GetMessage): Job => JSON.parse(m.content.toString()) as Job;
const HEARTBEAT_SECONDS = 1;

function cpuConfig(threads?: number): RawConfig {
  return {
    tenants: ['acme'],
    broker: { heartbeat: HEARTBEAT_SECONDS },
    queues: { crunch: { default_retry: { max_attempts: 1 } } },
    stages: {
      cruncher: { module: './cpu-stages.js', concurrency: 2, options: { greeting: 'hej' }, ...(threads === undefined ? {} : { threads }) },
    },
  };
}

/**
 * The test configuration: the stage on a 1 s heartbeat. The publisher and the queue inspector
 * keep the default heartbeat: they live on the test's thread, which the control test blocks.
 */
function testConfig(threads?: number): { config: CompiledConfig; publisherConfig: CompiledConfig } {
  const config = withTestConfig(cpuConfig(threads), path.join(here, '../fixtures/config.json'));
  const publisherConfig: CompiledConfig = { ...config, broker: { ...config.broker, heartbeat: 60 } };
  return { config, publisherConfig };
}

/** The longest stall of this thread's event loop while it runs (sampled every 20 ms). */
function watchEventLoop(): { stop: () => number } {
  let last = Date.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = Date.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 20);
  return {
    stop: () => {
      clearInterval(timer);
      return worst;
    },
  };
}

describe('worker threads for CPU-bound stages', function () {
  this.timeout(60000);

  describe('a stage with threads: 2 on a 1 s heartbeat', () => {
    let config: CompiledConfig;
    let names: BrokerNames;
    let stage: LoadedStage;
    let group: StageGroup;
    let raw: RawBroker;
    let publisher: Publisher;
    let reports: BroadcastChannel;
    const received: Array<Record<string, unknown>> = [];
    let failed: Error | undefined;
    const crunched = (): string => names.queue('crunched', 'acme');
    const dead = (): string => names.deadQueue('crunch', 'acme');
    const crunch = (mode: string, key: string, n?: number, extra: Partial<JobSpec> = {}): Promise<string> =>
      publisher.publish('crunch', { type: 'crunch', args: n === undefined ? [mode, key] : [mode, key, n], tenant: 'acme', ...extra });

    before(async () => {
      const configs = testConfig(2);
      config = configs.config;
      names = new BrokerNames(config.prefix);
      stage = await loadStage(config, 'cruncher');
      reports = new BroadcastChannel(REPORTS);
      reports.onmessage = (event: unknown) => received.push((event as { data: Record<string, unknown> }).data);
      group = new StageGroup(config, [{ stage, tenant: 'acme' }], log);
      void group.failed.then((err) => (failed = err));
      await group.start(true);
      raw = await RawBroker.connect(configs.publisherConfig.broker.url);
      publisher = await Publisher.connect(configs.publisherConfig, { log });
    });

    after(async () => {
      await publisher?.close();
      await group?.stop();
      await raw?.close();
      reports?.close();
      await teardown(config, [stage.metadata]);
    });

    afterEach(async () => {
      for (const queue of [crunched(), dead()]) await raw.drain(queue);
    });

    it('keeps its connection while a handler burns the CPU for 5 s, and runs a second job on the other thread meanwhile', async () => {
      const loop = watchEventLoop();
      const started = Date.now();
      await crunch('crunch', 'slow', 5000);
      await crunch('crunch', 'quick', 50);
      const arrived = new Map<string, { at: number; where: Whereabouts }>();
      const both = waitFor(
        'both outputs',
        async () => {
          for (const message of await raw.drain(crunched())) {
            const [key, where] = body(message).args as [string, Whereabouts];
            arrived.set(key, { at: Date.now() - started, where });
          }
          return arrived.size === 2;
        },
        20000,
      );
      // Lost heartbeats would show as a reconnection (the group heals itself) or a failure.
      await Promise.race([both, group.failed.then((err) => Promise.reject(err))]);
      const stall = loop.stop();

      const slow = arrived.get('slow') as { at: number; where: Whereabouts };
      const quick = arrived.get('quick') as { at: number; where: Whereabouts };
      expect(quick.at, 'the quick job finished while the slow one burned').to.be.below(3000);
      expect(slow.at).to.be.at.least(5000);
      expect(slow.where.main || quick.where.main, 'handlers ran off the main thread').to.equal(false);
      expect(slow.where.thread).to.not.equal(quick.where.thread);
      expect(stall, 'longest event-loop stall on the main thread (ms)').to.be.below(HEARTBEAT_SECONDS * 1000);
      expect(group.connections, 'the connection was never lost').to.equal(1);
      expect(group.readiness()).to.deep.equal({ ready: true });
      expect(failed).to.equal(undefined);
      // The outputs can be on the broker a moment before the runner has counted its inputs done.
      await waitFor('both inputs completed', () => group.runners[0].stats.completed === 2, 5000);
      expect(group.runners[0].stats.deadLettered).to.equal(0);
    });

    it('builds the stage in the worker with the same injection as on the main thread', async () => {
      await crunch('whoami', 'ada');
      const [message] = await waitFor('the output', async () => {
        const taken = await raw.drain(crunched());
        return taken.length > 0 && taken;
      });
      const [key, where, injected, context] = body(message).args as [string, Whereabouts, Record<string, unknown>, Record<string, unknown>];
      expect(key).to.equal('ada');
      expect(where.main).to.equal(false);
      expect(injected).to.deep.equal({
        tenant: 'acme',
        variant: null,
        options: { greeting: 'hej' },
        greeting: 'hej, ada',
        logger: 'function',
      });
      expect(context).to.deep.equal({ stage: 'cruncher', tenant: 'acme', header: 'acme' });
    });

    it('dead-letters a NonRetryableError thrown in the worker with its type, message and stack', async () => {
      const id = await crunch('non-retryable', 'bad');
      const [message] = await waitFor('the dead letter', async () => {
        const taken = await raw.drain(dead());
        return taken.length > 0 && taken;
      });
      const job = body(message);
      expect(job.id).to.equal(id);
      expect(job.error).to.include({ type: 'CorruptInput', message: 'corrupt input bad' });
      expect((job.error?.backtrace ?? []).join('\n'), "the worker's stack").to.include('cpu-stages.js');
      expect(message.properties.headers).to.include({ 'x-ojs-error-type': 'CorruptInput' });
    });

    it('follows handler outcomes thrown in the worker: DEAD_LETTER with its type, DISCARD, RETRY after its delay', async () => {
      const before = { ...group.runners[0].stats };
      await crunch('dead-letter', 'hopeless');
      await crunch('discard', 'obsolete');
      const published = Date.now();
      await crunch('retry-once', 'later', 1500, { retry: { max_attempts: 2 } });

      const [deadLetter] = await waitFor('the dead letter', async () => {
        const taken = await raw.drain(dead());
        return taken.length > 0 && taken;
      });
      expect(body(deadLetter).error).to.include({ type: 'Hopeless', message: 'hopeless hopeless' });
      const [retried] = await waitFor('the retried job done', async () => {
        const taken = await raw.drain(crunched());
        return taken.length > 0 && taken;
      });
      expect(body(retried).args[0]).to.equal('later');
      expect(body(retried).args[2], 'on its second attempt').to.equal(2);
      expect(Date.now() - published, 'after the RetryJob delay').to.be.at.least(1400);
      const stats = group.runners[0].stats;
      expect(stats.discarded - before.discarded).to.equal(1);
      expect(stats.retried - before.retried).to.equal(1);
      expect(stats.deadLettered - before.deadLettered).to.equal(1);
    });

    it('acknowledges only after emits the worker did not await are confirmed (its ctx.confirmed() answered), and refuses an undeclared output', async () => {
      await crunch('emit-many', 'many', 25);
      await waitFor('25 outputs', async () => (await raw.count(crunched())) === 25);
      const outputs = await raw.drain(crunched());
      expect(outputs.map((m) => body(m).args[2]).sort((a, b) => Number(a) - Number(b))).to.deep.equal([...Array(25).keys()]);

      await crunch('emit-stray', 'stray');
      const [deadLetter] = await waitFor('the dead letter', async () => {
        const taken = await raw.drain(dead());
        return taken.length > 0 && taken;
      });
      expect(body(deadLetter).error?.type, "the main thread's UnknownOutputError, through the worker and back").to.equal('UNKNOWN_OUTPUT');
    });

    it('fails a job whose thread dies (uncaught exception, process.exit) and replaces the thread', async () => {
      await crunch('crash', 'crashing');
      await crunch('exit', 'exiting', 3);
      await waitFor('two dead letters', async () => (await raw.count(dead())) === 2);
      const errors = (await raw.drain(dead())).map((m) => body(m).error);
      expect(errors.map((e) => e?.type)).to.deep.equal(['ThreadCrashError', 'ThreadCrashError']);
      expect(errors.map((e) => e?.message).sort()).to.deep.equal([
        'worker thread died: crash crashing',
        'worker thread exited with code 3',
      ]);

      // Both threads were replaced: two jobs run at once again.
      await crunch('crunch', 'a', 1000);
      await crunch('crunch', 'b', 1000);
      await waitFor('both outputs', async () => (await raw.count(crunched())) === 2);
      const threads = new Set((await raw.drain(crunched())).map((m) => (body(m).args[1] as Whereabouts).thread));
      expect(threads.size).to.equal(2);
      expect(group.connections).to.equal(1);
    });

    it('aborts ctx.signal in the worker when the job runs past its timeout', async () => {
      await crunch('until-abort', 'patient', undefined, { timeout: 1 });
      await waitFor('the abort seen in the worker', () => received.find((r) => r.key === 'patient'));
      const [deadLetter] = await waitFor('the dead letter', async () => {
        const taken = await raw.drain(dead());
        return taken.length > 0 && taken;
      });
      expect(body(deadLetter).error?.type).to.equal('HANDLER_TIMEOUT');
      const report = received.find((r) => r.key === 'patient') as { aborted: boolean; reason: string; where: Whereabouts };
      expect(report).to.deep.include({ aborted: true, reason: 'HANDLER_TIMEOUT' });
      expect(report.where.main).to.equal(false);
    });
  });

  describe('control: the same stage on the main thread', () => {
    it('loses its connection when a handler burns the CPU past two heartbeats', async function () {
      // Two bounded waits of 20 s, then a stop that waits for the blocked loop: room on a busy machine.
      this.timeout(120_000);
      const { config, publisherConfig } = testConfig();
      const stage = await loadStage(config, 'cruncher');
      const group = new StageGroup(config, [{ stage, tenant: 'acme' }], log);
      const publisher = await Publisher.connect(publisherConfig, { log });
      try {
        await group.start(true);
        expect(group.connections).to.equal(1);
        await publisher.publish('crunch', { type: 'crunch', args: ['crunch', 'blocking', 6000], tenant: 'acme' });
        await waitFor('the connection lost to missed heartbeats', () => group.connections > 1 || !group.readiness().ready, 20000, 20);
        // The loop stalled before the loss: the job in hand is blamed, not forgiven (see LossLedger).
        await waitFor('the blocking job taken for a crash', () => group.runners[0].stats.poisonRedeliveries >= 1, 20000);
      } finally {
        await publisher.close();
        await group.stop(0);
        await teardown(config, [stage.metadata]);
      }
    });
  });

  describe('the thread pool', () => {
    let config: CompiledConfig;
    let stage: LoadedStage;

    before(async () => {
      config = testConfig().config;
      stage = await loadStage(config, 'cruncher');
    });

    /** A context whose emits are recorded, as the runner's would be. */
    function context(emitted: unknown[][], signal = new AbortController().signal): StageContext {
      return {
        stage: 'cruncher',
        tenant: 'acme',
        headers: {},
        signal,
        log,
        progress: () => undefined,
        emit: ((_output: string, spec: EmitSpec) => {
          emitted.push(spec.args ?? []);
          return Promise.resolve(`id-${emitted.length}`);
        }) as StageContext['emit'],
        confirmed: () => Promise.resolve(),
      };
    }
    const job = (args: unknown[]): Job => ({
      specversion: '1.0',
      id: 'job-1',
      type: 'crunch',
      queue: 'crunch',
      args,
      meta: {},
      attempt: 1,
      created_at: new Date().toISOString(),
      tenant: 'acme',
    });
    const pool = (threads: number, abortGraceMs?: number): Promise<ThreadedHandler> =>
      createThreadedHandler({
        stage,
        config,
        tenant: 'acme',
        variant: undefined,
        threads,
        log,
        ...(abortGraceMs === undefined ? {} : { abortGraceMs }),
      });
    const rejection = async (promise: Promise<unknown>): Promise<Error> => {
      try {
        await promise;
      } catch (err) {
        return err as Error;
      }
      throw new Error('expected a rejection');
    };

    it("resolves with what the worker's handler returned, as JSON writes it; a result JSON cannot write completes the job without one", async () => {
      const handler = await pool(1);
      try {
        expect(await handler.handle(job(['result', 'k', 3]), context([]))).to.deep.equal({ key: 'k', pages: 3, thread: true });
        expect(await handler.handle(job(['bad-result', 'k', 3]), context([]))).to.equal(undefined);
      } finally {
        await handler.close();
      }
    });

    it('fails to start when a thread cannot load the stage module', async () => {
      const broken = withTestConfig(
        { ...cpuConfig(1), stages: { cruncher: { module: './no-such-stages.js', threads: 1 } } },
        path.join(here, '../fixtures/config.json'),
      );
      const error = await rejection(createThreadedHandler({ stage, config: broken, tenant: 'acme', variant: undefined, threads: 2, log }));
      expect(error).to.be.instanceOf(StagecoachError);
      expect(error).to.include({ name: 'StageNotFoundError', code: 'STAGE_NOT_FOUND' });
      expect(error.message).to.include('no-such-stages.js');
    });

    it('rebuilds what the worker threw as the classes the failure logic checks', async () => {
      const handler = await pool(1);
      try {
        const fatal = await rejection(handler.handle(job(['non-retryable', 'k']), context([])));
        expect(fatal).to.be.instanceOf(StagecoachError);
        expect(fatal).to.include({ name: 'NonRetryableError', code: 'NON_RETRYABLE', type: 'CorruptInput', message: 'corrupt input k' });
        expect(fatal.stack).to.include('cpu-stages.js');
        const retry = await rejection(handler.handle(job(['retry-once', 'k', 1234]), context([])));
        expect(retry).to.be.instanceOf(RetryJob);
        expect((retry as RetryJob).delayMs).to.equal(1234);
        const deadLetter = await rejection(handler.handle(job(['dead-letter', 'k']), context([])));
        expect(deadLetter).to.be.instanceOf(DeadLetterJob);
        expect((deadLetter as DeadLetterJob).type).to.equal('Hopeless');
        expect(await rejection(handler.handle(job(['discard', 'k']), context([])))).to.be.instanceOf(DiscardJob);
        const typeError = await rejection(handler.handle(job(['type-error', 'k']), context([])));
        expect(typeError).to.include({ name: 'TypeError', message: 'bad type k' });
      } finally {
        await handler.close();
      }
    });

    it('runs jobs first come, first served when every thread is busy; a job aborted while waiting never starts', async () => {
      const handler = await pool(1);
      const emitted: unknown[][] = [];
      try {
        const waiting = new AbortController();
        const first = handler.handle(job(['crunch', 'first', 300]), context(emitted));
        const skipped = handler.handle(job(['crunch', 'skipped', 0]), context(emitted, waiting.signal));
        const second = handler.handle(job(['crunch', 'second', 0]), context(emitted));
        waiting.abort(new StagecoachError('HANDLER_TIMEOUT', 'waited too long'));
        expect(await rejection(skipped)).to.include({ code: 'HANDLER_TIMEOUT' });
        await Promise.all([first, second]);
        expect(emitted.map((args) => args[0])).to.deep.equal(['first', 'second']);
      } finally {
        await handler.close();
      }
    });

    describe('abort listeners', () => {
      const JOBS = 200;
      const abortListeners = (signal: AbortSignal): number => getEventListeners(signal, 'abort').length;

      it('leaves none on the shared never-aborted signal after 200 jobs, most of them queued for a thread', async () => {
        // The signal every job without a timeout gets: the one a real JobContext hands out.
        const sink = { send: () => Promise.resolve() };
        const shared = new JobContext('cruncher', ['crunched'], job([]), {}, sink, log, undefined).signal;
        expect(abortListeners(shared), 'listeners before the test').to.equal(0);
        const handler = await pool(2);
        const emitted: unknown[][] = [];
        try {
          const ctx = context(emitted, shared);
          const all = Promise.all(Array.from({ length: JOBS }, (_, i) => handler.handle(job(['crunch', `k${i}`, 0]), ctx)));
          // One for the jobs still waiting, one per running job (its thread forwards the abort).
          expect(abortListeners(shared), 'abort listeners while 198 jobs wait for 2 threads').to.be.at.most(1 + 2);
          await all;
          expect(emitted).to.have.length(JOBS);
          expect(abortListeners(shared), 'abort listeners left on the shared signal').to.equal(0);
        } finally {
          await handler.close();
        }
      });

      it('leaves none on per-job signals, whether the job ran, failed or was aborted while it waited', async () => {
        const handler = await pool(2);
        const emitted: unknown[][] = [];
        try {
          const controllers = Array.from({ length: JOBS }, () => new AbortController());
          const mode = (i: number): string => (i % 10 === 3 ? 'type-error' : 'crunch');
          const outcomes = controllers.map((controller, i) =>
            handler.handle(job([mode(i), `k${i}`, 0]), context(emitted, controller.signal)).then(
              () => 'done',
              (err: Error) => err.name,
            ),
          );
          // The last jobs are still waiting for a thread: their signals abort before they start.
          const aborted = controllers.slice(-5);
          for (const controller of aborted) controller.abort(new StagecoachError('HANDLER_TIMEOUT', 'waited too long'));
          const settled = await Promise.all(outcomes);
          expect(settled.filter((outcome) => outcome === 'StagecoachError')).to.have.length(aborted.length);
          expect(settled.filter((outcome) => outcome === 'TypeError')).to.have.length(JOBS / 10);
          const left = controllers.map((controller) => abortListeners(controller.signal)).filter((n) => n > 0);
          expect(left, 'signals that still hold abort listeners').to.deep.equal([]);
        } finally {
          await handler.close();
        }
      });

      it('leaves none on the signals of jobs still waiting when the pool closes', async () => {
        const handler = await pool(1);
        const busy = handler.handle(job(['crunch', 'busy', 200]), context([]));
        const signals = Array.from({ length: 5 }, () => new AbortController().signal);
        const waiting = signals.map((signal, i) => rejection(handler.handle(job(['crunch', `w${i}`, 0]), context([], signal))));
        await handler.close();
        await busy;
        for (const error of await Promise.all(waiting)) expect(error).to.include({ code: 'INVALID_REQUEST' });
        expect(signals.map(abortListeners)).to.deep.equal([0, 0, 0, 0, 0]);
      });
    });

    it('terminates and replaces a thread whose handler ignores its abort', async () => {
      const handler = await pool(1, 200);
      const emitted: unknown[][] = [];
      try {
        const controller = new AbortController();
        const started = Date.now();
        const stuck = handler.handle(job(['crunch', 'stuck', 30000]), context(emitted, controller.signal));
        setTimeout(() => controller.abort(new StagecoachError('HANDLER_TIMEOUT', 'too slow')), 100);
        expect(await rejection(stuck)).to.include({ code: 'HANDLER_TIMEOUT' });
        expect(Date.now() - started).to.be.below(5000);
        await handler.handle(job(['crunch', 'next', 0]), context(emitted));
        expect(emitted.map((args) => args[0])).to.deep.equal(['next']);
      } finally {
        await handler.close();
      }
    });

    it('closes after the job in flight has settled, and takes no job after', async () => {
      const handler = await pool(2);
      const emitted: unknown[][] = [];
      const running = handler.handle(job(['crunch', 'last', 500]), context(emitted));
      await handler.close();
      await running;
      expect(emitted.map((args) => args[0])).to.deep.equal(['last']);
      expect(await rejection(handler.handle(job(['crunch', 'late', 0]), context(emitted)))).to.include({ code: 'INVALID_REQUEST' });
    });
  });
});
