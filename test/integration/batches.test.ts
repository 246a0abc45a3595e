import { expect } from 'chai';
import { readTracking, Tracker } from '../../src/tracker/tracker.js';
import type { TrackedBatch } from '../../src/batch/batch-fold.js';
import { parseRecord, type TrackingRecord } from '../../src/tracking-stream/tracking-report.js';
import { TrackingReader } from '../../src/tracking-stream/tracking-reader.js';
import { batchView } from '../../src/batch/batch-views.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { EventTap } from '../helpers/event-tap.js';
import { sinkGate } from '../fixtures/batch-stages.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { batchPipelineConfig } from '../helpers/batch-pipeline.js';
import { waitFor } from '../helpers/wait-for.js';
import amqplib from 'amqplib';

const log = createLogger({ test: 'batches' }, 'error');

/** Every record on the stream so far, read by a reader of its own up to a mark it writes. */
async function streamRecords(config: CompiledConfig): Promise<Array<{ record: TrackingRecord; content: Buffer }>> {
  const seen: Array<{ record: TrackingRecord; content: Buffer }> = [];
  const connection = await amqplib.connect(config.broker.url);
  try {
    const reader = await TrackingReader.open(connection, config, log, (record) =>
      seen.push({ record, content: Buffer.from(JSON.stringify(record)) }),
    );
    await reader.caughtUp();
    await reader.close();
  } finally {
    await connection.close();
  }
  return seen;
}

describe('batches (tracking stream, tracker, status)', function () {
  this.timeout(60_000);
  let running: (RunningGroup & { config: CompiledConfig }) | undefined;
  let tap: EventTap | undefined;
  const trackers: Tracker[] = [];

  before(async () => {
    const config = batchPipelineConfig();
    tap = await EventTap.open(config.broker.url, `${config.prefix}.events`);
    const group = await startGroup(
      config,
      [{ stage: 'scanner' }, { stage: 'reader', tenant: 'acme' }, { stage: 'sink', tenant: 'acme' }],
      log,
    );
    running = { ...group, config };
  });

  // One tracker at a time: two running at once may both announce a batch (docs/batches.md).
  afterEach(async () => {
    for (const tracker of trackers.splice(0)) await tracker.close();
  });

  after(async () => {
    await tap?.close();
    await running?.stop();
  });

  const completions = (batch: string): number => tap?.of('batch.completed', (event) => event.subject === batch).length ?? 0;

  async function track(): Promise<{ tracker: Tracker; completed: TrackedBatch[] }> {
    const completed: TrackedBatch[] = [];
    const tracker = await Tracker.start(running!.config, { log, onCompleted: (batch) => completed.push(batch) });
    trackers.push(tracker);
    return { tracker, completed };
  }

  it('completes a batch through a three-stage fan-out exactly once, with the right counts', async () => {
    const { tracker, completed } = await track();
    const root = await running!.publisher.publish('scans', { type: 'scan', args: [3], tenant: 'acme', batch: 'scan-ok' });
    await waitFor('scan-ok completed', () => completed.some((batch) => batch.id === 'scan-ok'), 30_000);
    // 1 scan + 3 files + 6 parts.
    expect(tracker.batch('scan-ok')?.counts).to.deep.equal({
      known: 10,
      completed: 10,
      failed: 0,
      dead: 0,
      discarded: 0,
      cancelled: 0,
      in_flight: 0,
    });
    await waitFor('the event', () => completions('scan-ok') === 1);
    const event = tap!.of('batch.completed', (e) => e.subject === 'scan-ok')[0].event;
    expect(event.data).to.deep.include({ batch: 'scan-ok', tenant: 'acme', failed: false });
    // Status from the stream, no tracker asked.
    const fold = await readTracking(running!.config, log);
    expect(batchView(fold.batch('scan-ok')!)).to.deep.include({ id: 'scan-ok', tenant: 'acme', state: 'completed', announced: true });
    expect(fold.job(root)?.children.size).to.equal(3);
    await tracker.sync();
    expect(completions('scan-ok')).to.equal(1);
  });

  it('completes a batch with a dead-lettered job as failed', async () => {
    const { tracker, completed } = await track();
    await running!.publisher.publish('scans', { type: 'scan', args: [3, 1], tenant: 'acme', batch: 'scan-dead' });
    await waitFor('scan-dead completed', () => completed.some((batch) => batch.id === 'scan-dead'), 30_000);
    // 1 scan + 3 files (one dead) + 4 parts.
    expect(tracker.batch('scan-dead')?.counts).to.deep.equal({
      known: 8,
      completed: 7,
      failed: 1,
      dead: 1,
      discarded: 0,
      cancelled: 0,
      in_flight: 0,
    });
    await waitFor('the event', () => completions('scan-dead') === 1);
    expect(tap!.of('batch.completed', (e) => e.subject === 'scan-dead')[0].event.data).to.deep.include({ failed: true });
  });

  it('duplicate reports (a crash between report and ack) and a restarted tracker change nothing, and announce nothing again', async () => {
    const { tracker, completed } = await track();
    await running!.publisher.publish('scans', { type: 'scan', args: [2], tenant: 'acme', batch: 'scan-dup' });
    await waitFor('scan-dup completed', () => completed.some((batch) => batch.id === 'scan-dup'), 30_000);
    const before = { ...tracker.batch('scan-dup')!.counts };
    // Every settlement report of the batch appended again, as a stage that crashed after its
    // report and before its ack would repeat it.
    const stream = running!.names.tracking;
    const settlements = (await streamRecords(running!.config)).filter(
      ({ record }) => record.kind === 'settled' && record.batch === 'scan-dup',
    );
    // One `started` and one settlement per job (docs/job-state.md).
    const records = settlements.filter(({ record }) => record.kind === 'settled' && record.outcome !== 'started');
    expect(records.length).to.equal(1 + 2 + 4);
    expect(settlements.length).to.equal(2 * (1 + 2 + 4));
    const connection = await amqplib.connect(running!.config.broker.url);
    const channel = await connection.createConfirmChannel();
    for (const { content } of records) channel.sendToQueue(stream, content, { contentType: 'application/json' });
    await channel.waitForConfirms();
    await connection.close();
    await tracker.sync();
    expect(tracker.batch('scan-dup')?.counts).to.deep.equal(before);
    // A tracker started now replays the whole stream to the same state, and announces nothing.
    const again = await track();
    await again.tracker.sync();
    expect(again.tracker.batch('scan-dup')?.counts).to.deep.equal(before);
    expect(again.tracker.batch('scan-ok')?.counts.completed).to.equal(10);
    expect(again.completed).to.deep.equal([]);
    expect(completions('scan-dup')).to.equal(1);
    expect(parseRecord(records[0].content)?.kind).to.equal('settled');
  });

  it('a tracker stopped mid-batch and restarted ends with the same counts and announces the batch once', async () => {
    const first = await track();
    sinkGate.close();
    try {
      await running!.publisher.publish('scans', { type: 'scan', args: [3, null, 'hold'], tenant: 'acme', batch: 'scan-restart' });
      // Every job known (1 scan + 3 files + 6 parts) and the sink holding parts: mid-batch.
      await waitFor('the batch known and in flight', async () => {
        await first.tracker.sync();
        const counts = first.tracker.batch('scan-restart')?.counts;
        return counts?.known === 10 && counts.in_flight > 0 && sinkGate.held.length > 0;
      });
      const inFlight = first.tracker.batch('scan-restart')!.counts.in_flight;
      trackers.splice(trackers.indexOf(first.tracker), 1);
      await first.tracker.close();
      // Progress while no tracker runs: one held part settles.
      const sink = running!.group.runners.find((runner) => runner.name === 'sink/acme')!;
      const settled = (): number => sink.stats.completed;
      const before = settled();
      sinkGate.releaseOne();
      await waitFor('one part settled while no tracker ran', () => settled() > before);
      // Restarted while the batch is still in flight: the replay resumes it, nothing announced.
      const second = await track();
      const resumed = second.tracker.batch('scan-restart')!.counts;
      expect(resumed.known).to.equal(10);
      expect(resumed.in_flight).to.be.greaterThan(0).and.lessThan(inFlight);
      expect(second.completed).to.deep.equal([]);
      expect(completions('scan-restart')).to.equal(0);
      sinkGate.releaseAll();
      await waitFor('scan-restart completed', () => second.completed.some((batch) => batch.id === 'scan-restart'), 30_000);
      const expected = { known: 10, completed: 10, failed: 0, dead: 0, discarded: 0, cancelled: 0, in_flight: 0 };
      expect(second.tracker.batch('scan-restart')?.counts).to.deep.equal(expected);
      // The log says the same to a reader that never stopped, and the event went out once.
      expect((await readTracking(running!.config, log)).batch('scan-restart')?.counts).to.deep.equal(expected);
      await waitFor('the event', () => completions('scan-restart') === 1);
      await second.tracker.sync();
      expect(completions('scan-restart')).to.equal(1);
    } finally {
      sinkGate.releaseAll();
    }
  });

  it('lets a handler start a new batch: its jobs leave the parent batch, which does not wait for them', async () => {
    const { tracker, completed } = await track();
    const root = await running!.publisher.publish('scans', {
      type: 'scan',
      args: [2, null, null, 'split'],
      tenant: 'acme',
      batch: 'scan-split',
    });
    await waitFor(
      'the three batches completed',
      () => ['scan-split', 'split-0', 'split-1'].every((id) => completed.some((b) => b.id === id)),
      30_000,
    );
    // The parent holds its root only; each file is the root of its own batch: 1 file + 2 parts.
    expect(tracker.batch('scan-split')?.counts).to.include({ known: 1, completed: 1, in_flight: 0 });
    expect(tracker.fold.job(root)?.children.size).to.equal(0);
    for (const id of ['split-0', 'split-1']) {
      expect(tracker.batch(id)).to.deep.include({ tenant: 'acme' });
      expect(tracker.batch(id)?.counts).to.include({ known: 3, completed: 3, in_flight: 0 });
    }
  });

  it("keeps a batch id reused for another tenant apart: that tenant's own batch, the first one unchanged", async () => {
    const { tracker } = await track();
    await running!.publisher.publish('scans', { type: 'scan', args: [0], tenant: 'globex', batch: 'scan-ok' });
    const theirs = await waitFor("globex's batch", async () => {
      await tracker.sync();
      return tracker.batch('scan-ok', 'globex');
    });
    expect(theirs.counts.known).to.be.at.least(1);
    expect(tracker.batch('scan-ok', 'acme')).to.deep.include({ tenant: 'acme', refused: 0 });
    expect(tracker.batch('scan-ok', 'acme')?.counts.known).to.equal(10);
  });
});
