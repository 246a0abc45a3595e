import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { BatchCounts, TrackedBatch } from '../../src/batch/batch-fold.js';
import { readTracking, Tracker } from '../../src/tracker/tracker.js';
import { batchView } from '../../src/batch/batch-views.js';
import type { RawConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import type { ResultLine } from '../../stages/exporter.stage.js';
import { finished, REPO_ROOT, spawnCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { EventTap } from '../helpers/event-tap.js';
import { Supervisor } from '../helpers/supervisor.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * Batches under faults, on the example pipeline as deployed: explorer, converter, matcher and
 * exporter each a `stagecoach run` process (restarted when it dies, as a container runtime
 * would), one scan of DOCS documents per test as one batch, and a tracker.
 *
 * (a) an undisturbed scan completes once with the exact counts;
 * (b) the converter SIGKILLed twice mid-scan: its jobs in hand run again (suspects), re-runs emit
 *     children with new ids (real work too), and duplicate reports arrive; the batch still
 *     completes once, with nothing in flight or failed, every document exported, and counts that
 *     agree with what the exporter wrote (see countsAgreeWithResults);
 * (c) the tracker process SIGKILLed mid-scan and started again: the same end state as (a), and
 *     one announcement across both tracker processes.
 *
 * "Mid-scan" is made, not hoped for: the converter is frozen (SIGSTOP) while the scan's
 * conversions are published, let run down to a chosen number waiting, and frozen again for the
 * kill, so conversions still wait and the converter has a full prefetch window in hand.
 */

const DOCS = 1_200;
const TENANT = 'acme';
const SAMPLE = path.join(REPO_ROOT, 'stages/samples/acme/contacts.txt');
const STAGES: StageMetadata[] = [
  { name: 'explorer', input: 'scan-specs', outputs: ['conversions'], types: ['scan.folder'] },
  { name: 'converter', input: 'conversions', outputs: ['representations'], types: ['doc.convert'] },
  { name: 'matcher', input: 'representations', outputs: ['matches'], types: ['doc.text'] },
  { name: 'exporter', input: 'matches', outputs: [], types: ['doc.matches'] },
];
const log = createLogger({ test: 'batches-faults' }, 'error');

/** One scan, undisturbed: the root, then per document a conversion, a text and a matches job. */
const UNDISTURBED: BatchCounts = {
  known: 1 + 3 * DOCS,
  completed: 1 + 3 * DOCS,
  failed: 0,
  dead: 0,
  discarded: 0,
  cancelled: 0,
  in_flight: 0,
};

describe('batches under faults: the example pipeline as stage processes', function () {
  this.timeout(180_000);
  let project: ConfigFile | undefined;
  let supervisor: Supervisor | undefined;
  let tap: EventTap | undefined;
  let publisher: Publisher | undefined;
  let workDir: string | undefined;
  const trackers: Tracker[] = [];
  const completed: TrackedBatch[] = [];

  const resultsFile = (): string => path.join(workDir as string, 'results', `${TENANT}.jsonl`);
  const conversionsQueue = (): string => project!.names.queue('conversions', TENANT);
  const consuming = (name: string): boolean => supervisor!.alive(name) && supervisor!.stderr(name).includes('"stage consuming"');
  const announcements = (batch: string): number => tap!.of('batch.completed', (event) => event.subject === batch).length;

  before(async () => {
    workDir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-batch-faults-'));
    const samples = path.join(workDir, 'samples');
    await mkdir(path.join(samples, TENANT), { recursive: true });
    for (let i = 0; i < DOCS; i++) await copyFile(SAMPLE, path.join(samples, TENANT, `doc-${String(i).padStart(4, '0')}.txt`));
    const pipeline = JSON.parse(await readFile(path.join(REPO_ROOT, 'config/pipeline.json'), 'utf8')) as RawConfig;
    const stage = (name: string, options?: Record<string, unknown>) => ({
      module: path.join(REPO_ROOT, `dist/stages/${name}.stage.js`),
      concurrency: 4,
      prefetch: 10,
      ...(options ? { options } : {}),
    });
    project = await writeConfigFile(
      {
        tenants: [TENANT],
        strict_queues: true,
        queues: pipeline.queues ?? {},
        stages: {
          explorer: stage('explorer', { samplesDir: samples }),
          converter: stage('converter'),
          matcher: stage('matcher'),
          exporter: stage('exporter', { resultsDir: path.join(workDir, 'results') }),
        },
      },
      STAGES,
      'batch-faults',
    );
    tap = await EventTap.open(project.config.broker.url, project.names.events);
    const sup = (supervisor = new Supervisor());
    const env = { STAGECOACH_HTTP_PORT: '0', LOG_LEVEL: 'info' };
    sup.add('explorer', ['run', 'explorer', '--config', project.file], env);
    sup.add('converter', ['run', 'converter', '--tenant', TENANT, '--config', project.file], env);
    sup.add('matcher', ['run', 'matcher', '--tenant', TENANT, '--config', project.file], env);
    sup.add('exporter', ['run', 'exporter', '--config', project.file], env);
    await waitFor('every stage process consuming', () => sup.names.every(consuming), 60_000);
    publisher = await Publisher.connect(project.config, { log });
  });

  // One tracker at a time: two running at once may both announce a batch (docs/batches.md).
  afterEach(async () => {
    for (const tracker of trackers.splice(0)) await tracker.close();
  });

  after(async () => {
    await publisher?.close();
    await supervisor?.stopAll().catch(() => undefined);
    await tap?.close();
    await project?.remove().catch(() => undefined);
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  async function track(): Promise<Tracker> {
    const tracker = await Tracker.start(project!.config, { log, onCompleted: (batch) => completed.push(batch) });
    trackers.push(tracker);
    return tracker;
  }

  /** Publishes a scan of the tenant's folder as batch `batch`; resolves with the scan job's id (the results' scan_id). */
  const scan = (batch: string): Promise<string> =>
    publisher!.publish('scan-specs', { type: 'scan.folder', args: [TENANT], tenant: TENANT, batch });

  /** The exporter's lines of one scan: every line, and the distinct documents and job ids among them. */
  async function results(scanId: string): Promise<{ lines: number; documents: Set<string>; jobs: Set<string> }> {
    const text = await readFile(resultsFile(), 'utf8').catch(() => '');
    const lines = text
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as ResultLine)
      .filter((line) => line.scan_id === scanId);
    return { lines: lines.length, documents: new Set(lines.map((l) => l.document)), jobs: new Set(lines.map((l) => l.job_id)) };
  }

  /** Conversions still waiting for the converter. */
  const waiting = async (): Promise<number> => (await project!.raw.count(conversionsQueue())) ?? 0;

  /**
   * Brings the scan to a point mid-scan, chosen rather than raced: waits until the explorer's root
   * settled (every conversion of the scan published), lets the converter run until it has brought
   * the waiting conversions down to `below`, and freezes it there (SIGSTOP), with conversions
   * still waiting and a prefetch window in hand. The caller freezes the converter before
   * publishing the scan (or it runs from a restart) and thaws or kills it after acting. Resolves
   * with the conversions left waiting.
   */
  async function converterHeldAt(what: string, readBatch: () => Promise<BatchCounts | undefined>, below: number): Promise<number> {
    await waitFor(`${what}: every conversion of the scan published`, async () => ((await readBatch())?.known ?? 0) >= 1 + DOCS, 60_000);
    supervisor!.thaw('converter');
    await waitFor(`${what}: the converter down to ${below} waiting conversions`, async () => (await waiting()) <= below, 60_000, 5);
    supervisor!.freeze('converter');
    const left = await waiting();
    expect(left, `${what}: the conversions must not all be gone when the converter is held (mid-scan)`).to.be.greaterThan(0);
    return left;
  }

  /** Exactly one `batch.completed` for `batch`, counted after a fence through the events exchange. */
  async function announcedOnce(batch: string): Promise<void> {
    await waitFor(`the batch.completed event of ${batch}`, () => announcements(batch) > 0, 60_000);
    await waitFor(
      `the announced record of ${batch}`,
      async () => (await readTracking(project!.config, log)).batch(batch)?.announced,
      30_000,
    );
    await tap!.fence();
    expect(announcements(batch), `batch.completed events of ${batch}`).to.equal(1);
  }

  it('(a) an undisturbed scan completes exactly once, with the exact counts', async () => {
    const tracker = await track();
    const scanId = await scan('scan-a');
    await waitFor('scan-a completed', () => completed.some((b) => b.id === 'scan-a'), 120_000);
    expect(tracker.batch('scan-a')?.counts).to.deep.equal(UNDISTURBED);
    await announcedOnce('scan-a');
    const out = await results(scanId);
    expect(out.documents.size).to.equal(DOCS);
    expect(out.lines, 'no result line twice without a fault').to.equal(DOCS);
    await tracker.sync();
    expect(tracker.batch('scan-a')?.counts).to.deep.equal(UNDISTURBED);
    expect(completed.filter((b) => b.id === 'scan-a')).to.have.length(1);
  });

  it('(b) with the converter SIGKILLed twice mid-scan: completes once, nothing in flight or failed, every document exported, counts that agree with the results', async () => {
    const tracker = await track();
    const counts = async () => {
      await tracker.sync();
      return tracker.batch('scan-b')?.counts;
    };
    supervisor!.freeze('converter');
    const scanId = await scan('scan-b');
    for (const [kill, below] of [
      [1, Math.floor((DOCS * 3) / 4)],
      [2, Math.floor(DOCS / 3)],
    ] as const) {
      const run = supervisor!.run('converter');
      await converterHeldAt(`kill ${kill}`, counts, below);
      supervisor!.kill('converter', 'SIGKILL');
      await waitFor(
        `the converter restarted after kill ${kill}`,
        () => supervisor!.run('converter') > run && consuming('converter'),
        60_000,
      );
    }
    await waitFor('scan-b completed', () => completed.some((b) => b.id === 'scan-b'), 120_000);
    await announcedOnce('scan-b');
    await tracker.sync();
    const end = tracker.batch('scan-b')!.counts;
    expect(end).to.include({ in_flight: 0, failed: 0, dead: 0, discarded: 0, cancelled: 0 });
    expect(end.completed).to.equal(end.known);
    const out = await results(scanId);
    expect(out.documents.size, 'every document exported').to.equal(DOCS);
    // The explorer and the matcher never crashed: DOCS conversions, and every text job (one per
    // converter run that got its emit out, re-runs included) made one matches job, exported
    // under its own job id. So the batch knows the root, the conversions, and two jobs per
    // distinct exported job id: re-runs add real work, never a phantom or a lost job.
    expect(end.known, `known vs ${out.jobs.size} distinct exported job ids`).to.equal(1 + DOCS + 2 * out.jobs.size);
    expect(end.known).to.be.at.least(UNDISTURBED.known);
    // The kills struck jobs in hand: they came back as suspects and ran again.
    const fold = await readTracking(project!.config, log);
    const suspects = [...fold.jobs.values()].filter((job) => job.batch === 'scan-b' && job.reports.some((r) => r.outcome === 'suspect'));
    console.log(
      `      scan-b: ${end.known} jobs known (undisturbed ${UNDISTURBED.known}), ${out.lines} result lines, ${out.jobs.size} distinct exported job ids, ${suspects.length} suspects`,
    );
    expect(suspects.length, 'converter jobs redelivered after a kill').to.be.greaterThan(0);
    expect(fold.batch('scan-b')?.counts).to.deep.equal(end);
    expect(
      supervisor!.ownExits.filter((exit) => exit.name === 'converter'),
      'exits the test did not cause',
    ).to.deep.equal([]);
  });

  it('(c) a tracker process SIGKILLed mid-scan and started again ends as an undisturbed one and announces once', async () => {
    const { file, config } = project!;
    const env = { STAGECOACH_HTTP_PORT: '0', LOG_LEVEL: 'info' };
    const first = spawnCli(['tracker', '--config', file], env);
    let second: ReturnType<typeof spawnCli> | undefined;
    try {
      await waitFor('the first tracker caught up', () => first.err.includes('"tracker caught up"'), 60_000);
      supervisor!.freeze('converter');
      await scan('scan-c');
      const left = await converterHeldAt(
        'tracker kill',
        async () => (await readTracking(config, log)).batch('scan-c')?.counts,
        Math.floor(DOCS / 2),
      );
      first.kill('SIGKILL');
      await finished(first, 10_000, 'tracker (killed)');
      supervisor!.thaw('converter');
      // The scan goes on while no tracker runs.
      await waitFor('progress while no tracker runs', async () => (await waiting()) < left, 60_000);
      expect(announcements('scan-c'), 'announced before the scan ended').to.equal(0);
      second = spawnCli(['tracker', '--config', file], env);
      await waitFor('the second tracker caught up', () => second!.err.includes('"tracker caught up"'), 60_000);
      await announcedOnce('scan-c');
      const view = batchView((await readTracking(config, log)).batch('scan-c')!);
      expect(view).to.deep.include({ state: 'completed', announced: true, refused: 0, conflicts: 0, jobs: UNDISTURBED });
      expect(first.err).to.not.include('"batch completed"');
      second.kill('SIGTERM');
      expect((await finished(second, 15_000, 'tracker')).code).to.equal(0);
      expect(second.err.split('\n').filter((line) => line.includes('"batch completed"') && line.includes('scan-c'))).to.have.length(1);
    } finally {
      supervisor!.thaw('converter');
      if (first.exitCode === null && first.signalCode === null) first.kill('SIGKILL');
      if (second && second.exitCode === null && second.signalCode === null) second.kill('SIGKILL');
    }
  });
});
