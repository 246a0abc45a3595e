/**
 * The example pipeline end to end, in one process: `npm start`.
 *
 * Starts every stage of config/pipeline.json for every tenant (what `stagecoach dev` runs),
 * publishes one scan per tenant, waits for the exporter's results and prints them. Exits 0 when
 * every tenant's scan is complete, 1 on timeout or failure. Env: AMQP_URL, STAGECOACH_CONFIG,
 * LOG_LEVEL (default warn: stdout carries the summary, stderr the logs).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger, devInstances, loadAllStages, loadConfig, Publisher, StageGroup } from '../src/index.js';
import { purge } from '../src/testing/index.js';
import type { ResultLine } from '../stages/exporter.stage.js';
import { readScanResults, scanComplete } from '../stages/lib/results.js';

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
  try {
    const started = Date.now();
    await group.start(true);
    const publisher = await Publisher.connect(config, { log });
    const scans = new Map<string, string>();
    try {
      // The scan job's id becomes the scan id on every result line: the results of this run
      // are told apart from any older line by it.
      for (const tenant of config.tenants) {
        scans.set(tenant, await publisher.publish('scan_specs', { type: 'scan.folder', args: [tenant], tenant }));
      }
    } finally {
      await publisher.close();
    }

    const results = new Map<string, ResultLine[]>();
    for (;;) {
      for (const [tenant, scanId] of scans) results.set(tenant, await readScanResults(resultsFile(tenant), scanId));
      if ([...results.values()].every(scanComplete)) break;
      if (failure) throw failure;
      if (Date.now() - started > TIMEOUT_MS) {
        const progress = [...results].map(([tenant, lines]) => `${tenant} ${lines.length}/${lines[0]?.scan_total ?? '?'}`);
        console.error(`demo: timed out after ${TIMEOUT_MS / 1000} s waiting for results (${progress.join(', ')} documents).`);
        console.error(`demo: look for dead letters, e.g. \`stagecoach dead list conversions --tenant acme --config ${CONFIG_FILE}\`.`);
        return 1;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    console.log(`Scanned ${config.tenants.length} tenants in ${((Date.now() - started) / 1000).toFixed(1)} s; results in ${resultsDir}\n`);
    for (const [tenant, lines] of results) console.log(summary(tenant, lines));
    return 0;
  } finally {
    await group.stop();
  }
}

function summary(tenant: string, lines: readonly ResultLine[]): string {
  const findings = lines.flatMap((line) => line.findings);
  const kinds = (['email', 'card', 'national_id'] as const)
    .map((kind) => `${kind} ${findings.filter((finding) => finding.kind === kind).length}`)
    .join(', ');
  const width = Math.max(...lines.map((line) => line.document.length));
  const rows = lines.map((line) => {
    const found = line.findings.map((finding) => `${finding.kind} ${finding.value}`).join(', ') || '(nothing found)';
    return `  ${line.document.padEnd(width)}  ${found}`;
  });
  return [`${tenant}: ${lines.length} documents, ${findings.length} findings (${kinds})`, ...rows, ''].join('\n');
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
