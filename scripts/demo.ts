/**
 * The example pipeline end to end, in one process: `npm start`.
 *
 * Starts every stage of config/pipeline.json for every tenant (what `stagecoach dev` runs) and a
 * tracker, starts one workflow per tenant (`<tenant>-scan-<n>`): the scan, then a report step that
 * sums the scan's findings once the scan and every job it led to have ended (docs/workflows.md);
 * waits for the tracker to announce each workflow's batch complete (`batch.completed`), and prints
 * each scan's counts, the exporter's findings and the report. Exits 0 when every tenant's scan
 * completed with no failed job and its report agrees, 1 on timeout or failure. Env: AMQP_URL, STAGECOACH_CONFIG, LOG_LEVEL (default warn: stdout carries
 * the summary, stderr the logs).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chain, createLogger, devInstances, loadAllStages, loadConfig, Publisher, StageGroup } from '../src/index.js';
import { payloadOffloaderFor, stepJobId, Tracker, WorkflowAdvancer, type BatchCounts, type TrackedBatch } from '../src/runtime.js';
import { purge } from '../src/testing/index.js';
import type { ResultLine } from '../stages/exporter.stage.js';
import { readScanResults, scanComplete } from '../stages/lib/results.js';
import type { ScanReport } from '../stages/reporter.stage.js';

const TIMEOUT_MS = 60_000;
// Compiled, this file is dist/scripts/demo.js: find the config from here, not from the cwd.
const CONFIG_FILE = process.env.STAGECOACH_CONFIG ?? fileURLToPath(new URL('../../config/pipeline.json', import.meta.url));

async function main(): Promise<number> {
  const log = createLogger({ component: 'demo' }, process.env.LOG_LEVEL ?? 'warn');
  const config = await loadConfig(CONFIG_FILE);
  const stages = await loadAllStages(config);
  const options = config.stages.get('exporter')?.options ?? {};
  // Resolved like the exporter does, against the working directory.
  const resultsDir = path.resolve(typeof options.resultsDir === 'string' ? options.resultsDir : 'results');
  const resultsFile = (tenant: string) => path.join(resultsDir, `${tenant}.jsonl`);

  // Jobs left in the queues by an aborted run would otherwise be processed along with ours.
  await purge(
    config,
    stages.map((stage) => stage.metadata),
  );
  await Promise.all(config.tenants.map((tenant) => rm(resultsFile(tenant), { force: true })));

  const group = new StageGroup(config, devInstances(config, stages), log);
  let failure: Error | undefined;
  void group.failed.then((err) => (failure = err));
  const stop = () => void group.stop().finally(() => process.exit(130));
  process.once('SIGINT', stop).once('SIGTERM', stop);
  let tracker: Tracker | undefined;
  let payloads: ReturnType<typeof payloadOffloaderFor> | undefined;
  try {
    const started = Date.now();
    await group.start(true);
    // The tracker folds the settlement reports every stage appends to the tracking stream: it
    // advances each workflow (the report step once the scan has ended) and announces its batch
    // complete (`batch.completed`) when the report has run too (docs/workflows.md, docs/batches.md).
    const announced = new Map<string, TrackedBatch>();
    payloads = payloadOffloaderFor(config, log);
    tracker = await Tracker.start(config, {
      log,
      onCompleted: (batch) => announced.set(batch.id, batch),
      plugins: [WorkflowAdvancer.plugin({ config, log, payloads })],
    });
    const publisher = await Publisher.connect(config, { log });
    // tenant -> its scan: the workflow's (and batch's) id, and the scan job's id, which is the scan
    // id on every result line (the results of this run are told apart from any older line by it).
    const scans = new Map<string, { batch: string; job: string }>();
    try {
      for (const tenant of config.tenants) {
        const batch = nextScanBatch(tracker, tenant);
        const scan = { queue: 'scan-specs', type: 'scan.folder', args: [tenant] };
        const report = { queue: 'reports', type: 'scan.report', args: [] };
        await publisher.workflow(chain(scan, report), { tenant, id: batch });
        scans.set(tenant, { batch, job: stepJobId(batch, '0') });
      }
    } finally {
      await publisher.close();
    }

    while (![...scans.values()].every(({ batch }) => announced.has(batch))) {
      if (failure) throw failure;
      if (Date.now() - started > TIMEOUT_MS) {
        const progress = [...scans].map(([tenant, { batch }]) => {
          const counts = tracker?.batch(batch)?.counts;
          return `${tenant} ${counts === undefined ? 'nothing reported' : `${counts.completed}/${counts.known} jobs done, ${counts.failed} failed`}`;
        });
        console.error(`demo: timed out after ${TIMEOUT_MS / 1000} s waiting for the scans to complete (${progress.join('; ')}).`);
        console.error(`demo: look at \`stagecoach batch list --config ${CONFIG_FILE}\` and the dead letters, e.g.`);
        console.error(`demo: \`stagecoach dead list conversions --tenant acme --config ${CONFIG_FILE}\`.`);
        return 1;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    console.log(`Scanned ${config.tenants.length} tenants in ${((Date.now() - started) / 1000).toFixed(1)} s; results in ${resultsDir}\n`);
    let ok = true;
    for (const [tenant, { batch, job }] of scans) {
      const done = announced.get(batch) as TrackedBatch;
      // Complete means every job settled, so every document the exporter was sent has its line.
      const lines = await readScanResults(resultsFile(tenant), job);
      console.log(`${tenant}: scan ${batch} completed (batch.completed): ${jobCounts(done.counts)}`);
      console.log(summary(lines));
      // The report step's result: the findings it summed once the scan had ended.
      const report = tracker.fold.job(stepJobId(batch, '1'))?.final?.result as ScanReport | undefined;
      console.log(
        `  report: ${report === undefined ? 'missing' : `${report.exported} of ${report.documents} documents, ${report.findings} findings (email ${report.by_kind.email}, card ${report.by_kind.card}, national_id ${report.by_kind.national_id})`}\n`,
      );
      const found = lines.flatMap((line) => line.findings).length;
      if (done.counts.failed > 0 || !scanComplete(lines) || report?.findings !== found) ok = false;
    }
    if (!ok) {
      console.error(
        `demo: a scan had failed jobs or missing documents; see \`stagecoach dead list conversions --tenant acme --config ${CONFIG_FILE}\`.`,
      );
      return 1;
    }
    return 0;
  } finally {
    await tracker?.close();
    await payloads?.store.close();
    await group.stop();
  }
}

/**
 * The tenant's next scan batch, `<tenant>-scan-<n>`: one past the highest the tracking stream
 * remembers (the tracker replayed it at start). A batch id is never reused while the stream keeps
 * it: a finished batch that gained a root would go back to running and never be announced again.
 */
function nextScanBatch(tracker: Tracker, tenant: string): string {
  const pattern = new RegExp(`^${tenant}-scan-(\\d+)$`);
  let highest = 0;
  for (const id of tracker.fold.batches.keys()) highest = Math.max(highest, Number(pattern.exec(id)?.[1] ?? 0));
  return `${tenant}-scan-${highest + 1}`;
}

function jobCounts(counts: BatchCounts): string {
  return `${counts.known} jobs, ${counts.completed} completed, ${counts.failed} failed`;
}

function summary(lines: readonly ResultLine[]): string {
  const findings = lines.flatMap((line) => line.findings);
  const kinds = (['email', 'card', 'national_id'] as const)
    .map((kind) => `${kind} ${findings.filter((finding) => finding.kind === kind).length}`)
    .join(', ');
  const width = Math.max(...lines.map((line) => line.document.length));
  const rows = lines.map((line) => {
    const found = line.findings.map((finding) => `${finding.kind} ${finding.value}`).join(', ') || '(nothing found)';
    return `  ${line.document.padEnd(width)}  ${found}`;
  });
  return [`  ${lines.length} documents, ${findings.length} findings (${kinds})`, ...rows.map((row) => `  ${row}`), ''].join('\n');
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
