import { writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { inject, NonRetryableError, Stage, STAGE_OPTIONS, type Job, type StageHandler } from '../src/index.js';
import type { Finding } from './lib/find-sensitive.js';
import { readScanResults } from './lib/results.js';

/** What the explorer returns for a scan: the workflow hands it to the report step as `parent_results[0]`. */
export interface ScanResult {
  scan_id: string;
  folder: string;
  documents: number;
}

/** A tenant's scan report: `<resultsDir>/<tenant>.report.json`, and the report step's result. */
export interface ScanReport {
  scan_id: string;
  folder: string;
  documents: number;
  /** Documents the exporter wrote a line for (every one, once the scan completed). */
  exported: number;
  findings: number;
  by_kind: Record<Finding['kind'], number>;
}

/** The tenant becomes a file name: a slug only. */
const TENANT = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/**
 * The step after a tenant's scan in the example workflow (`chain(scan, report)`, scripts/demo.ts;
 * docs/workflows.md): it runs once the scan and every job it led to (conversions, matches,
 * exports) have ended, gets the scan's result as `parent_results[0]`, sums the findings the
 * exporter wrote for that scan, and writes them to `<resultsDir>/<tenant>.report.json`.
 *
 * Job `scan.report`, no args. Option `resultsDir`: the exporter's (default `results`).
 */
@Stage({ name: 'reporter', input: 'reports', types: ['scan.report'] })
export class Reporter implements StageHandler {
  private readonly dir: string;

  constructor(@inject(STAGE_OPTIONS) options: Record<string, unknown>) {
    if (options.resultsDir !== undefined && typeof options.resultsDir !== 'string') {
      throw new TypeError('stages.reporter.options.resultsDir must be a string');
    }
    this.dir = path.resolve(options.resultsDir ?? 'results');
  }

  async handle(job: Job): Promise<ScanReport> {
    const scan = job.parent_results?.[0] as Partial<ScanResult> | undefined;
    if (typeof scan?.scan_id !== 'string' || typeof scan.documents !== 'number') {
      throw new NonRetryableError("a report follows a scan: parent_results[0] must be the scan's result", 'InvalidReport');
    }
    if (job.tenant === undefined || !TENANT.test(job.tenant)) throw new NonRetryableError('a report needs a tenant', 'InvalidReport');
    const lines = await readScanResults(path.join(this.dir, `${job.tenant}.jsonl`), scan.scan_id);
    const findings = lines.flatMap((line) => line.findings);
    const report: ScanReport = {
      scan_id: scan.scan_id,
      folder: scan.folder ?? '',
      documents: scan.documents,
      exported: lines.length,
      findings: findings.length,
      by_kind: { email: 0, card: 0, national_id: 0 },
    };
    for (const finding of findings) report.by_kind[finding.kind] = (report.by_kind[finding.kind] ?? 0) + 1;
    await mkdir(this.dir, { recursive: true });
    await writeFile(path.join(this.dir, `${job.tenant}.report.json`), `${JSON.stringify(report, null, 2)}\n`);
    return report;
  }
}
