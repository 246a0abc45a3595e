import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { inject, NonRetryableError, Stage, STAGE_OPTIONS, type Job, type StageHandler } from '../src/index.js';
import type { Finding } from './lib/find-sensitive.js';
import { scanMeta } from './lib/scan-meta.js';

/** The same rule as the framework's tenant slugs: it is also what keeps a tenant a safe file name. */
const TENANT = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** One line of `<resultsDir>/<tenant>.jsonl`. */
export interface ResultLine {
  document: string;
  findings: Finding[];
  scan_id: string | null;
  scan_total: number | null;
  /** Delivery is at-least-once: a reader drops a repeated job_id. */
  job_id: string;
}

/**
 * Writes the findings of every tenant, one JSON line per document, to `<resultsDir>/<tenant>.jsonl`.
 * Shared: jobs of all tenants arrive on one queue, and the job's tenant picks the file.
 *
 * Job `doc.matches`, args `[documentName, findings]`. Option `resultsDir` (relative to the
 * working directory; default `results`).
 */
@Stage({ name: 'exporter', input: 'matches', types: ['doc.matches'] })
export class Exporter implements StageHandler {
  private readonly dir: string;

  constructor(@inject(STAGE_OPTIONS) options: Record<string, unknown>) {
    if (options.resultsDir !== undefined && typeof options.resultsDir !== 'string') {
      throw new TypeError('stages.exporter.options.resultsDir must be a string');
    }
    this.dir = path.resolve(options.resultsDir ?? 'results');
  }

  async handle(job: Job): Promise<void> {
    const [document, findings] = job.args;
    if (typeof document !== 'string' || !Array.isArray(findings)) {
      throw new NonRetryableError('args must be [documentName, findings]', 'InvalidMatches');
    }
    // The tenant becomes a file name: anything but a slug (`../x`) is refused.
    if (job.tenant === undefined || !TENANT.test(job.tenant)) {
      throw new NonRetryableError(`job has no valid tenant (${String(job.tenant)})`, 'InvalidMatches');
    }
    const meta = scanMeta(job.meta);
    const line: ResultLine = {
      document,
      findings: findings as Finding[],
      scan_id: meta.scan_id ?? null,
      scan_total: meta.scan_total ?? null,
      job_id: job.id,
    };
    // Every time, not once: the directory may be removed while the stage runs (the demo clears it).
    await mkdir(this.dir, { recursive: true });
    // One appendFile per line: each is a single O_APPEND write, so concurrent jobs never interleave within a line.
    await appendFile(path.join(this.dir, `${job.tenant}.jsonl`), JSON.stringify(line) + '\n');
  }
}
