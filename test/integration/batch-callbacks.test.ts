import { expect } from 'chai';
import { callbackJobId } from '../../src/batch/batch-callbacks.js';
import type { TrackedBatch } from '../../src/batch/batch-fold.js';
import { Tracker } from '../../src/tracker/tracker.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { StagecoachError } from '../../src/errors/errors.js';
import type { BatchCallbacks, CallbackName, Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { notes } from '../fixtures/callback-stages.js';
import { runCli } from '../helpers/cli.js';
import { EventTap } from '../helpers/event-tap.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { batchPipelineConfig } from '../helpers/batch-pipeline.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'batch-callbacks' }, 'error');

const note = (type: string, args: unknown[] = []) => ({ queue: 'notes', type, args });
const ALL: BatchCallbacks = { on_complete: note('scan.done', ['all']), on_success: note('scan.ok'), on_failure: note('scan.failed') };

describe('batch callbacks (OJS on_complete / on_success / on_failure)', function () {
  this.timeout(60_000);
  let running: (RunningGroup & { config: CompiledConfig }) | undefined;
  let tap: EventTap | undefined;
  let tracker: Tracker | undefined;
  const completed: TrackedBatch[] = [];

  before(async () => {
    const config = batchPipelineConfig({ notes: { module: './callback-stages.js', concurrency: 4 } });
    tap = await EventTap.open(config.broker.url, `${config.prefix}.events`);
    const group = await startGroup(
      config,
      [{ stage: 'scanner' }, { stage: 'reader', tenant: 'acme' }, { stage: 'sink', tenant: 'acme' }, { stage: 'notes', tenant: 'acme' }],
      log,
    );
    running = { ...group, config };
    tracker = await Tracker.start(config, { log, onCompleted: (batch) => completed.push(batch) });
  });

  after(async () => {
    await tracker?.close();
    await tap?.close();
    await running?.stop();
  });

  /** The callback jobs the notes stage ran for `batch`. */
  const callbacksOf = (batch: string): Job[] =>
    notes.received.filter((job) => (job.meta.batch_callback as { batch?: string } | undefined)?.batch === batch);

  /**
   * Runs a batch to its announcement, then waits until the notes queue is empty and its stage
   * idle: every callback the tracker published (all before the event) has then been run.
   */
  async function runBatch(batch: string, args: unknown[]): Promise<{ counts: TrackedBatch['counts']; ran: Job[] }> {
    await running!.publisher.publish('scans', { type: 'scan', args, tenant: 'acme', batch, callbacks: ALL });
    await waitFor(`${batch} announced`, () => completed.some((b) => b.id === batch), 30_000);
    await tap!.next('batch.completed', (event) => event.subject === batch);
    const queue = running!.names.queue('notes', 'acme');
    const runner = running!.group.runners.find((r) => r.name === 'notes/acme')!;
    await waitFor('the notes queue drained and its stage idle', async () => {
      const ready = await running!.raw.count(queue);
      return ready === 0 && runner.stats.completed === notes.received.length;
    });
    return { counts: { ...tracker!.batch(batch)!.counts }, ran: callbacksOf(batch) };
  }

  function expectCallback(job: Job, batch: string, name: CallbackName, counts: TrackedBatch['counts']): void {
    expect(job.id).to.equal(callbackJobId(batch, name));
    expect(job.tenant).to.equal('acme');
    // Outside the batch: it would keep it open.
    expect(job.meta.batch).to.equal(undefined);
    expect(job.meta.batch_callback).to.deep.equal({
      batch,
      callback: name,
      state: 'completed',
      tenant: 'acme',
      failed: counts.failed > 0,
      jobs: counts,
    });
    expect(tracker!.fold.job(job.id)).to.equal(undefined);
  }

  it('runs on_complete and on_success, not on_failure, for a batch with no failed job', async () => {
    const { counts, ran } = await runBatch('cb-ok', [3]);
    expect(counts).to.include({ known: 10, completed: 10, failed: 0, in_flight: 0 });
    expect(ran.map((job) => job.type)).to.have.members(['scan.done', 'scan.ok']);
    expect(ran).to.have.length(2);
    expectCallback(
      ran.find((job) => job.type === 'scan.done')!,
      'cb-ok',
      'on_complete',
      counts,
    );
    expectCallback(
      ran.find((job) => job.type === 'scan.ok')!,
      'cb-ok',
      'on_success',
      counts,
    );
    expect(ran.find((job) => job.type === 'scan.done')!.args).to.deep.equal(['all']);
    // The event names the callback jobs; the batch is not reopened by them.
    const event = tap!.of('batch.completed', (e) => e.subject === 'cb-ok')[0].event;
    expect(event.data).to.deep.include({
      callbacks: { on_complete: callbackJobId('cb-ok', 'on_complete'), on_success: callbackJobId('cb-ok', 'on_success') },
    });
    await tracker!.sync();
    expect(tracker!.batch('cb-ok')?.counts).to.deep.equal(counts);
  });

  it('runs on_complete and on_failure, not on_success, for a batch with a dead-lettered job', async () => {
    const { counts, ran } = await runBatch('cb-dead', [3, 1]);
    expect(counts).to.include({ known: 8, completed: 7, failed: 1, dead: 1, in_flight: 0 });
    expect(ran.map((job) => job.type)).to.have.members(['scan.done', 'scan.failed']);
    expect(ran).to.have.length(2);
    expectCallback(
      ran.find((job) => job.type === 'scan.failed')!,
      'cb-dead',
      'on_failure',
      counts,
    );
    await tap!.fence();
    expect(tap!.of('batch.completed', (e) => e.subject === 'cb-dead')).to.have.length(1);
  });

  it('a restarted tracker runs no callback again for a batch it finds announced', async () => {
    const before = notes.received.length;
    const again = await Tracker.start(running!.config, { log });
    try {
      await again.sync();
      expect(again.batch('cb-ok')).to.deep.include({ announced: true });
    } finally {
      await again.close();
    }
    expect(await running!.raw.count(running!.names.queue('notes', 'acme'))).to.equal(0);
    expect(notes.received.length).to.equal(before);
  });

  it('refuses callbacks that could not run for the batch, before publishing anything', async () => {
    const publisher = running!.publisher;
    const refused = async (spec: Parameters<typeof publisher.publish>[1]): Promise<string> => {
      try {
        await publisher.publish('scans', spec);
      } catch (err) {
        expect(err).to.be.instanceOf(StagecoachError);
        expect((err as StagecoachError).code).to.equal('INVALID_REQUEST');
        return (err as Error).message;
      }
      throw new Error('expected a refusal');
    };
    expect(await refused({ type: 'scan', args: [0], tenant: 'acme', callbacks: ALL })).to.match(/only a job started in a batch/);
    expect(
      await refused({
        type: 'scan',
        args: [0],
        tenant: 'acme',
        batch: 'cb-x',
        callbacks: { on_success: { ...note('n'), tenant: 'globex' } },
      }),
    ).to.match(/callbacks.on_success: "tenant" "globex" is not the batch's tenant/);
    expect(await refused({ type: 'scan', args: [0], batch: 'cb-y', callbacks: { on_complete: note('n') } })).to.match(
      /callbacks.on_complete: queue "notes" is tenant-scoped and the batch has no tenant/,
    );
    expect(
      await refused({ type: 'scan', args: [0], tenant: 'acme', batch: 'cb-z', callbacks: { on_failure: { queue: 'notes' } } as never }),
    ).to.match(/callbacks.on_failure: "type"/);
    // Nothing reached the stream: no report names these batches.
    await tracker!.sync();
    for (const batch of ['cb-x', 'cb-y', 'cb-z']) expect(tracker!.batch(batch)).to.equal(undefined);
  });

  it('publish: a bad --on-* flag exits 2 naming it, before the broker is touched', async () => {
    const base = ['publish', 'scans', '--type', 'scan', '--tenant', 'acme', '--config', '/nonexistent/stagecoach.json'];
    const withoutBatch = await runCli([...base, '--on-success', JSON.stringify(note('n'))]);
    expect(withoutBatch.code).to.equal(2);
    expect(withoutBatch.stderr).to.match(/need --batch/);
    const notJson = await runCli([...base, '--batch', 'b', '--on-failure', '{queue']);
    expect(notJson.code).to.equal(2);
    expect(notJson.stderr).to.match(/--on-failure is not JSON/);
    const noType = await runCli([...base, '--batch', 'b', '--on-complete', '{"queue":"notes"}']);
    expect(noType.code).to.equal(2);
    expect(noType.stderr).to.match(/--on-complete: "type" must be a non-empty string/);
  });
});
