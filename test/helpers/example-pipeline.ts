/**
 * The example pipeline (converter -> matcher -> exporter) as the fault test and the cluster test
 * run it: one `stagecoach run` process per stage and tenant (and variant) under a supervisor,
 * 10,000 jobs published before the faults, the exporter's result files tallied for lost and
 * duplicated jobs, and a job published afterwards that must go all the way through. Each test
 * brings its broker (a private node, a private cluster) and its faults.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import type { Logger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import type { ResultLine } from '../../stages/exporter.stage.js';
import { REPO_ROOT } from './cli.js';
import type { Supervisor } from './supervisor.js';
import { waitFor } from './wait-for.js';

export const JOBS = 10_000;
export const TENANTS = ['acme', 'globex'] as const;
export const CONCURRENCY = 8;
export const PREFETCH = 20;
/** No new result for this long while jobs are pending: the pipeline is stuck. */
export const STALL_MS = 30_000;
export const SAMPLE = path.join(REPO_ROOT, 'stages/samples/acme/contacts.txt');
export const STAGES: StageMetadata[] = [
  { name: 'converter', input: 'conversions', outputs: ['representations'], types: ['doc.convert'] },
  { name: 'matcher', input: 'representations', outputs: ['matches'], types: ['doc.text'] },
  { name: 'exporter', input: 'matches', outputs: [], types: ['doc.matches'] },
];

/** The queues of config/pipeline.json. */
export async function pipelineQueues(): Promise<NonNullable<RawConfig['queues']>> {
  const pipeline = JSON.parse(await readFile(path.join(REPO_ROOT, 'config/pipeline.json'), 'utf8')) as RawConfig;
  return pipeline.queues ?? {};
}

/** The `stages` of the configuration: the compiled example stages, the exporter writing to `resultsDir`. */
export function pipelineStages(resultsDir: string): NonNullable<RawConfig['stages']> {
  const stage = (name: string, options?: Record<string, unknown>) => ({
    module: path.join(REPO_ROOT, `dist/stages/${name}.stage.js`),
    concurrency: CONCURRENCY,
    prefetch: PREFETCH,
    ...(options ? { options } : {}),
  });
  return { converter: stage('converter'), matcher: stage('matcher'), exporter: stage('exporter', { resultsDir }) };
}

/** One `stagecoach run` process per stage and tenant (and variant), as deployed. */
export interface PipelineInstance {
  name: string;
  args: string[];
  /** The logical queue it consumes, and its tenant and variant (none for the shared exporter). */
  input: string;
  tenant?: string;
  variant?: string;
}

/** Per tenant a converter, a converter of the `pdf` variant and a matcher; one exporter for all. */
export function pipelineInstances(): PipelineInstance[] {
  return [
    ...TENANTS.flatMap((tenant) => [
      { name: `converter/${tenant}`, args: ['run', 'converter', '--tenant', tenant], input: 'conversions', tenant },
      {
        name: `converter/${tenant}/pdf`,
        args: ['run', 'converter', '--tenant', tenant, '--variant', 'pdf'],
        input: 'conversions',
        tenant,
        variant: 'pdf',
      },
      { name: `matcher/${tenant}`, args: ['run', 'matcher', '--tenant', tenant], input: 'representations', tenant },
    ]),
    { name: 'exporter', args: ['run', 'exporter'], input: 'matches' },
  ];
}

/** Starts every instance under `sup` (`env` per instance) and waits until each consumes. */
export async function startInstances<I extends PipelineInstance>(
  sup: Supervisor,
  instances: readonly I[],
  file: string,
  env: (instance: I) => Record<string, string>,
  timeoutMs: number,
): Promise<void> {
  for (const instance of instances) sup.add(instance.name, [...instance.args, '--config', file], env(instance));
  await waitFor('every stage process consuming', () => instances.every((i) => sup.stderr(i.name).includes('"stage consuming"')), timeoutMs);
}

export function occurrences(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + needle.length)) count++;
  return count;
}

/** The JSON log lines of `stderr` with this message. */
export function logged(stderr: string, message: string): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((line) => line.includes(`"message":"${message}"`))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return []; // a line cut short by a SIGKILL
      }
    });
}

export interface Tally {
  distinct: number;
  lines: number;
  /** Lines beyond the first for a document. */
  duplicates: number;
  /** ...of which repeat a job id: the exporter ran the same delivery again. */
  sameJob: number;
  /** Documents published but never exported. */
  missing: string[];
}

/** What the exporter wrote to `resultsDir` so far, against the JOBS documents published. */
export async function tally(resultsDir: string): Promise<Tally> {
  const seen = new Map<string, Set<string>>();
  let lines = 0;
  let sameJob = 0;
  for (const tenant of TENANTS) {
    const text = await readFile(path.join(resultsDir, `${tenant}.jsonl`), 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      let result: ResultLine;
      try {
        result = JSON.parse(line) as ResultLine;
      } catch {
        continue; // empty, or the line being written
      }
      lines++;
      const key = `${tenant}/${result.document}`;
      const jobs = seen.get(key) ?? new Set<string>();
      if (jobs.has(result.job_id)) sameJob++;
      jobs.add(result.job_id);
      seen.set(key, jobs);
    }
  }
  const missing: string[] = [];
  for (let i = 0; i < JOBS; i++) if (!seen.has(`${TENANTS[i % 2]}/doc-${i}.txt`)) missing.push(`${TENANTS[i % 2]}/doc-${i}.txt`);
  const distinct = JOBS - missing.length;
  return { distinct, lines, duplicates: lines - distinct, sameJob, missing };
}

/** Publishes the JOBS documents, alternating the tenants, all persistent, and waits for every confirm. */
export async function publishJobs(config: CompiledConfig, log: Logger, scanId: string): Promise<void> {
  const publisher = await Publisher.connect(config, { log });
  const published: Promise<string>[] = [];
  for (let i = 0; i < JOBS; i++) {
    published.push(
      publisher.publish('conversions', {
        type: 'doc.convert',
        args: [SAMPLE, `doc-${i}.txt`],
        tenant: TENANTS[i % 2],
        headers: { mime: 'text/plain' },
        meta: { scan_id: scanId, scan_total: JOBS / 2 },
      }),
    );
  }
  await Promise.all(published);
  await publisher.close();
}

/** Publishes one more document (`after.txt`, acme) and waits until the exporter wrote it. */
export async function publishAfter(config: CompiledConfig, log: Logger, resultsDir: string, what: string): Promise<void> {
  const again = await Publisher.connect(config, { log });
  await again.publish('conversions', {
    type: 'doc.convert',
    args: [SAMPLE, 'after.txt'],
    tenant: 'acme',
    headers: { mime: 'text/plain' },
  });
  await again.close();
  await waitFor(what, async () => (await readFile(path.join(resultsDir, 'acme.jsonl'), 'utf8')).includes('"document":"after.txt"'), 30_000);
}
