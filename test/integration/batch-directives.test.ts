import { expect } from 'chai';
import { cancelBatch, pauseBatch, pauseTenant, resumeBatch, resumeTenant } from '../../src/directives/batch-directives.js';
import { batchState, jobState, type TrackedBatch } from '../../src/batch/batch-fold.js';
import { Tracker } from '../../src/tracker/tracker.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { sinkGate } from '../fixtures/batch-stages.js';
import { EventTap } from '../helpers/event-tap.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { batchPipelineConfig } from '../helpers/batch-pipeline.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'batch-directives' }, 'error');

/**
 * `batch cancel|pause|resume` and `tenant pause|resume` against a running three-stage fan-out
 * (scanner on a shared queue, reader and sink per tenant): directives are marker exchanges the
 * stages read, parked jobs wait in `<prefix>.parked`, and the tracker's counts say what happened.
 */
describe('batch and tenant directives (cancel, pause, resume)', function () {
  this.timeout(90_000);
  let running: (RunningGroup & { config: CompiledConfig }) | undefined;
  let tracker: Tracker | undefined;
  let tap: EventTap | undefined;
  const completed: TrackedBatch[] = [];

  before(async () => {
    const config = batchPipelineConfig();
    tap = await EventTap.open(config.broker.url, `${config.prefix}.events`);
    const group = await startGroup(
      config,
      [
        { stage: 'scanner' },
        { stage: 'reader', tenant: 'acme' },
        { stage: 'sink', tenant: 'acme' },
        { stage: 'reader', tenant: 'globex' },
        { stage: 'sink', tenant: 'globex' },
      ],
      log,
    );
    running = { ...group, config };
    tracker = await Tracker.start(config, { log, onCompleted: (batch) => completed.push(batch) });
  });

  afterEach(() => sinkGate.releaseAll());

  after(async () => {
    sinkGate.releaseAll();
    await tracker?.close();
    await tap?.close();
    await running?.stop();
  });

  const batch = async (id: string): Promise<TrackedBatch | undefined> => {
    await tracker!.sync();
    return tracker!.batch(id);
  };
  const parkedDepth = async (): Promise<number> => (await running!.raw.count(running!.names.parked)) ?? -1;
  // The stages learn a directive from a control message: wait until they act on it.
  const stagesSee = (verdict: string, batchId: string | undefined, tenant = 'acme'): Promise<unknown> =>
    waitFor(`the stages to see ${verdict}`, async () => {
      const job = { tenant, meta: batchId === undefined ? {} : { batch: batchId } };
      return (await running!.group.directives.verdict(job)) === verdict;
    });
  const completedOnce = (id: string): boolean => completed.filter((b) => b.id === id).length === 1;
  const publishScan = (id: string, tenant = 'acme', args: unknown[] = [3, null, 'hold']): Promise<string> =>
    running!.publisher.publish('scans', { type: 'scan', args, tenant, batch: id });

  it('cancel stops a running scan: started jobs finish, the rest is discarded unrun, and it completes once as cancelled', async () => {
    sinkGate.close();
    await publishScan('scan-cancel');
    // 1 scan + 3 files + 6 parts known; the sink holds 4 (its concurrency), 2 wait.
    await waitFor(
      'the sink holding 4 parts of 6',
      async () => sinkGate.held.length === 4 && (await batch('scan-cancel'))?.counts.known === 10,
    );
    const result = await cancelBatch(running!.config, 'scan-cancel', log);
    expect(result).to.include({ action: 'cancel', batch: 'scan-cancel' });
    expect((await batch('scan-cancel'))?.cancelled).to.equal(true);
    await stagesSee('cancel', 'scan-cancel');
    // A job of the batch arriving at any stage from now on is discarded: a late root at the scanner.
    const late = await publishScan('scan-cancel', 'acme', [2]);
    await waitFor('the late root cancelled', async () => {
      const job = (await batch('scan-cancel')) && tracker!.fold.job(late);
      return job !== undefined && jobState(job) === 'cancelled';
    });
    expect(tracker!.fold.job(late)?.reports.map((r) => r.stage)).to.deep.equal(['scanner']);
    sinkGate.releaseAll();
    await waitFor('scan-cancel complete', () => completedOnce('scan-cancel'), 30_000);
    const done = (await batch('scan-cancel'))!;
    // The 4 running parts finished; the 2 waiting ones and the late root never ran.
    expect(done.counts).to.deep.equal({ known: 11, completed: 8, failed: 0, dead: 0, discarded: 0, cancelled: 3, in_flight: 0 });
    expect(batchState(done)).to.equal('cancelled');
    await waitFor('batch.completed', () => tap!.of('batch.completed', (e) => e.subject === 'scan-cancel').length === 1);
    // Nothing else of the tenant was touched.
    await publishScan('after-cancel', 'acme', [1]);
    await waitFor('another acme batch completes', () => completedOnce('after-cancel'), 30_000);
    expect((await batch('after-cancel'))?.counts.completed).to.equal(4);
  });

  it('refuses to cancel a batch nobody reported, or one already complete', async () => {
    await expectRejection(cancelBatch(running!.config, 'no-such-batch', log), /no batch "no-such-batch"/);
    await publishScan('already-done', 'acme', [1]);
    await waitFor('already-done complete', () => completedOnce('already-done'), 30_000);
    await expectRejection(cancelBatch(running!.config, 'already-done', log), /already completed/);
    await expectRejection(pauseBatch(running!.config, 'bad id!', log), /not a batch id/);
  });

  it('pause holds a running scan at every stage; resume sends the parked jobs on and it completes with the right count', async () => {
    sinkGate.close();
    await publishScan('scan-pause');
    await waitFor(
      'the sink holding 4 parts of 6',
      async () => sinkGate.held.length === 4 && (await batch('scan-pause'))?.counts.known === 10,
    );
    await pauseBatch(running!.config, 'scan-pause', log);
    expect((await batch('scan-pause'))?.paused).to.equal(true);
    await stagesSee('park-batch', 'scan-pause');
    // A second root arrives at the scanner while paused: parked there, unrun.
    const late = await publishScan('scan-pause', 'acme', [3, null, 'hold']);
    // The held parts finish (they were running); the 2 waiting parts are parked at the sink.
    sinkGate.releaseAll();
    sinkGate.close();
    // The parked copy and its report are confirmed together, in no set order: wait for both.
    const parkedStages = (): string[] =>
      [...tracker!.fold.jobs.values()]
        .filter((job) => job.batch === 'scan-pause' && jobState(job) === 'parked')
        .map((job) => job.reports.at(-1)!.stage)
        .sort();
    await waitFor(
      '3 jobs parked (2 parts at the sink, 1 root at the scanner)',
      async () => (await parkedDepth()) === 3 && (await batch('scan-pause'))!.counts.completed === 8 && parkedStages().length === 3,
      30_000,
    );
    expect((await batch('scan-pause'))!.counts).to.deep.include({ known: 11, completed: 8, in_flight: 3 });
    expect(parkedStages()).to.deep.equal(['scanner', 'sink', 'sink']);
    expect(jobState(tracker!.fold.job(late)!)).to.equal('parked');
    expect(completedOnce('scan-pause')).to.equal(false);

    const result = await resumeBatch(running!.config, 'scan-pause', log);
    expect(result).to.include({ moved: 3, kept: 0 });
    await stagesSee('run', 'scan-pause');
    sinkGate.releaseAll();
    await waitFor('scan-pause complete', () => completedOnce('scan-pause'), 30_000);
    // Two scans of 3 folders: 2 × (1 + 3 + 6), each job run once to completion.
    const done = (await batch('scan-pause'))!;
    expect(done.counts).to.deep.equal({ known: 20, completed: 20, failed: 0, dead: 0, discarded: 0, cancelled: 0, in_flight: 0 });
    expect(done.paused).to.equal(false);
    expect(batchState(done)).to.equal('completed');
    expect(await parkedDepth()).to.equal(0);
  });

  it('tenant pause parks every job of the tenant at every stage, shared ones included, and leaves other tenants alone', async () => {
    await pauseTenant(running!.config, 'acme', log);
    try {
      await stagesSee('park-tenant', undefined);
      const root = await publishScan('acme-held', 'acme', [2]);
      await waitFor('the acme root parked at the shared scanner', async () => {
        const job = (await batch('acme-held')) && tracker!.fold.job(root);
        return job !== undefined && jobState(job) === 'parked' && (await parkedDepth()) === 1;
      });
      // globex runs while acme is paused.
      await publishScan('globex-runs', 'globex', [2]);
      await waitFor('globex-runs complete', () => completedOnce('globex-runs'), 30_000);
      expect(completedOnce('acme-held')).to.equal(false);
      // A batch resume does not release what the tenant's pause parked.
      expect(await resumeBatch(running!.config, 'acme-held', log)).to.include({ moved: 0 });
      expect(await parkedDepth()).to.equal(1);
    } finally {
      await resumeTenant(running!.config, 'acme', log);
    }
    await waitFor('acme-held complete', () => completedOnce('acme-held'), 30_000);
    expect((await batch('acme-held'))?.counts).to.deep.include({ known: 7, completed: 7, in_flight: 0 });
  });

  it('a tenant pause of a tenant nobody provisioned is refused', async () => {
    await expectRejection(pauseTenant(running!.config, 'initech', log), /neither configured nor provisioned/);
  });
});

async function expectRejection(promise: Promise<unknown>, message: RegExp): Promise<void> {
  try {
    await promise;
  } catch (err) {
    expect((err as Error).message).to.match(message);
    return;
  }
  expect.fail(`expected a rejection matching ${String(message)}`);
}
