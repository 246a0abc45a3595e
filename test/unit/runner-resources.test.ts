import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { AmqpConnection } from '../../src/broker/amqp-connection.js';
import type { ConfirmPublisher } from '../../src/broker/confirm-publisher.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { StagecoachError } from '../../src/errors/errors.js';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import type { ChannelSupervisor } from '../../src/runner/channels/channel-supervisor.js';
import type { DirectiveGate } from '../../src/runner/handling/directive-gate.js';
import type { EventLoopWatch } from '../../src/runner/event-loop-watch.js';
import type { FairShare } from '../../src/runner/intake/fair-share.js';
import { IsolationGate } from '../../src/runner/intake/isolation-gate.js';
import { LossLedger } from '../../src/runner/loss-ledger.js';
import type { PooledResources, StageRunnerOptions } from '../../src/runner/runner-options.js';
import { RunnerResources, stallWindowMs } from '../../src/runner/runner-resources.js';
import type { QueueProbe, SharedChannel } from '../../src/runner/channels/shared-channel.js';
import { resolveStageInput } from '../../src/runner/stage-input.js';
import { stallWindowMs as exported } from '../../src/runner/stage-runner.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import type { StageContext, StageHandler } from '../../src/stage/stage.types.js';
import { withTestConfig } from '../../src/testing/test-config.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = createLogger({ test: 'runner-resources' }, 'error');
/** Never used: nothing here may reach the broker. */
const NO_CONNECTION = {} as AmqpConnection;

/** What the stubs and own resources were asked to do, in order. */
type Calls = string[];

/** A supervisor that only records: the pool's shared publisher channel. */
function sharedPublishers(calls: Calls): ChannelSupervisor<ConfirmPublisher> {
  return {
    attach: () => Promise.resolve(calls.push('publishers.attach')),
    detach: () => void calls.push('publishers.detach'),
    close: () => Promise.resolve(void calls.push('publishers.close')),
  } as unknown as ChannelSupervisor<ConfirmPublisher>;
}

function sharedDirectives(calls: Calls): DirectiveGate {
  return {
    attach: () => void calls.push('directives.attach'),
    close: () => Promise.resolve(void calls.push('directives.close')),
  } as unknown as DirectiveGate;
}

/** What a pool hands a tenant's runner; `handler` is the pool's when given. */
function pooled(calls: Calls, extra: Partial<PooledResources> = {}): PooledResources {
  return {
    publishers: sharedPublishers(calls),
    work: { name: 'work-0' } as unknown as SharedChannel,
    suspects: { name: 'suspects' } as unknown as SharedChannel,
    probe: { messageCount: () => Promise.resolve(0) } as unknown as QueueProbe,
    share: { name: 'share' } as unknown as FairShare,
    weight: 2,
    maxConcurrency: 3,
    prefetch: 7,
    ...extra,
  };
}

/** A handler with threads' `close(graceMs)`, recording it. */
function closingHandler(calls: Calls): StageHandler & { close(graceMs?: number): Promise<void> } {
  return {
    handle: (_job: Job, _ctx: StageContext) => Promise.resolve(),
    close: (graceMs?: number) => Promise.resolve(void calls.push(`handler.close(${graceMs})`)),
  };
}

describe('RunnerResources (what is own, what is shared)', () => {
  let config: CompiledConfig;
  let stage: LoadedStage;

  before(async () => {
    config = withTestConfig(
      { tenants: ['acme'], queues: {}, stages: { flaky: { module: './failure-stages.js', concurrency: 4 } } },
      path.join(here, '../fixtures/config.json'),
    );
    [stage] = await loadAllStages(config);
  });

  function build(options: Partial<StageRunnerOptions>): RunnerResources {
    const full: StageRunnerOptions = { config, stage, tenant: 'acme', log, ...options };
    const { settings, queues, topology } = resolveStageInput(config, stage, 'acme');
    return new RunnerResources(full, { settings, queue: queues.main, suspectQueue: queues.suspect, topology, onFatal: () => undefined });
  }

  /** Records the own resources' attach, detach and close on the instance itself. */
  function spyOnOwn(resources: RunnerResources, calls: Calls): void {
    const { publishers, directives } = resources;
    if (resources.owned.publishers) {
      const close = publishers.close.bind(publishers);
      publishers.attach = () => Promise.resolve(void calls.push('publishers.attach')) as never;
      publishers.detach = () => void calls.push('publishers.detach');
      publishers.close = () => (calls.push('publishers.close'), close());
    }
    if (resources.owned.directives) {
      const close = directives.close.bind(directives);
      directives.attach = () => void calls.push('directives.attach');
      directives.close = () => (calls.push('directives.close'), close());
    }
    const watch = (resources as unknown as { watch?: EventLoopWatch }).watch;
    if (watch !== undefined) {
      const close = watch.close.bind(watch);
      watch.close = () => (calls.push('watch.close'), close());
    }
  }

  /** attach, detach, then close as the runner does (`drained`), with its consumers closed in between. */
  async function lifeOf(resources: RunnerResources, calls: Calls, drained = true): Promise<void> {
    resources.attachDirectives(NO_CONNECTION);
    await resources.attachPublishers(NO_CONNECTION);
    resources.detach();
    await resources.close(drained, () => Promise.resolve(void calls.push('consumers.close')));
  }

  it('a runner alone owns everything, and closes it at stop: publisher and handler, its consumers, then watch and directives', async () => {
    const calls: Calls = [];
    const resources = build({});
    expect(resources.owned).to.deep.equal({ gate: true, directives: true, ledger: true, publishers: true, handler: true });
    expect(resources.gate).to.be.instanceOf(IsolationGate);
    expect(resources.ledger).to.be.instanceOf(LossLedger);
    spyOnOwn(resources, calls);
    // The built handler is the stage instance: give it threads' close to see it called.
    const handler = closingHandler(calls);
    (resources as unknown as { built: StageHandler }).built = handler;
    expect(await resources.handler()).to.equal(handler);
    await lifeOf(resources, calls, false);
    expect(calls).to.deep.equal([
      'directives.attach',
      'publishers.attach',
      'publishers.detach',
      'publishers.close',
      // A grace period that ran out is not granted twice: the threads end now.
      'handler.close(0)',
      'consumers.close',
      'watch.close',
      'directives.close',
    ]);
  });

  it('a drained stop lets the own handler finish as it likes', async () => {
    const calls: Calls = [];
    const resources = build({});
    (resources as unknown as { built: StageHandler }).built = closingHandler(calls);
    await resources.close(true, () => Promise.resolve());
    expect(calls).to.deep.equal(['handler.close(undefined)']);
  });

  it("in a group, the group's gate, ledger and directives are used and left alone; publisher and handler are its own", async () => {
    const calls: Calls = [];
    const gate = new IsolationGate();
    const ledger = new LossLedger({ stalledWithin: () => false } as unknown as EventLoopWatch, 1000);
    const directives = sharedDirectives(calls);
    const resources = build({ gate, ledger, directives });
    expect(resources.owned).to.deep.equal({ gate: false, directives: false, ledger: false, publishers: true, handler: true });
    expect(resources.gate).to.equal(gate);
    expect(resources.ledger).to.equal(ledger);
    expect(resources.directives).to.equal(directives);
    spyOnOwn(resources, calls);
    await lifeOf(resources, calls);
    expect(calls).to.deep.equal(['publishers.attach', 'publishers.detach', 'publishers.close', 'consumers.close']);
  });

  it("pooled, the pool's publisher, channels, slots and handler are used and never attached or closed by the runner", async () => {
    const calls: Calls = [];
    const handler = closingHandler(calls);
    const pool = pooled(calls, { handler });
    const resources = build({ pooled: pool, gate: new IsolationGate(), directives: sharedDirectives(calls) });
    expect(resources.owned).to.deep.equal({ gate: false, directives: false, ledger: true, publishers: false, handler: false });
    expect(resources.publishers).to.equal(pool.publishers);
    expect(resources.work).to.deep.equal({ prefetch: 7, shared: { channel: pool.work, probe: pool.probe } });
    expect(resources.suspects).to.deep.equal({ shared: { channel: pool.suspects, probe: pool.probe } });
    expect(resources.slots).to.deep.equal({ concurrency: 4, share: { pool: pool.share, weight: 2, maxConcurrency: 3 } });
    expect(resources.notice).to.equal('debug');
    expect(await resources.handler()).to.equal(handler);
    spyOnOwn(resources, calls);
    await lifeOf(resources, calls, false);
    // Only its own ledger's watch, and the consumers the runner closes.
    expect(calls).to.deep.equal(['consumers.close', 'watch.close']);
  });

  it('pooled without a shared handler builds its stage instance at the first job, and has nothing to close', async () => {
    const calls: Calls = [];
    const resources = build({ pooled: pooled(calls, { maxConcurrency: undefined }), suspectCheckMs: 50 });
    expect(resources.owned.handler).to.equal(true);
    expect(resources.slots).to.deep.equal({ concurrency: 4, share: { pool: resources.slots.share?.pool, weight: 2 } });
    expect(resources.suspects.checkMs).to.equal(50);
    const handler = await resources.handler();
    expect(handler).to.not.have.property('close');
    expect(await resources.handler(), 'built once').to.equal(handler);
    await resources.close(false, () => Promise.resolve());
  });

  it('alone, its options are its own: settings prefetch and concurrency, no shared channel', async () => {
    const resources = build({ suspectCheckMs: 10 });
    const settings = config.stages.get('flaky');
    expect(resources.work).to.deep.equal({ prefetch: settings?.prefetch });
    expect(resources.suspects).to.deep.equal({ checkMs: 10 });
    expect(resources.slots).to.deep.equal({ concurrency: 4 });
    expect(resources.notice).to.equal('info');
    await resources.close(true, () => Promise.resolve());
  });

  it('pooled with redeclare false only checks that the queue is still there', async () => {
    const calls: Calls = [];
    const present = build({ pooled: pooled(calls, { redeclare: false }) });
    await present.declare(NO_CONNECTION);
    const queue: { count: number | undefined } = { count: undefined };
    const gone = build({
      pooled: pooled(calls, { redeclare: false, probe: { messageCount: () => Promise.resolve(queue.count) } as unknown as QueueProbe }),
    });
    const err = await gone.declare(NO_CONNECTION).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(StagecoachError);
    expect((err as StagecoachError).code).to.equal('NOT_FOUND');
    expect((err as Error).message).to.match(/is gone \(its tenant retired, or the queue deleted\)/);
    queue.count = 0;
    await gone.declare(NO_CONNECTION);
    for (const resources of [present, gone]) await resources.close(true, () => Promise.resolve());
  });

  it('stallWindowMs is two heartbeats and five seconds, still exported by stage-runner', () => {
    expect(exported).to.equal(stallWindowMs);
    expect(stallWindowMs(config)).to.equal((2 * config.broker.heartbeat + 5) * 1000);
  });
});
