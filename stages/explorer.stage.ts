import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import {
  inject,
  LOGGER,
  NonRetryableError,
  Stage,
  STAGE_OPTIONS,
  type Job,
  type Logger,
  type StageContext,
  type StageHandler,
} from '../src/index.js';
import { mimeOf } from './lib/mime.js';
import { BUNDLED_SAMPLES_DIR } from './lib/samples-dir.js';
import type { ScanMeta } from './lib/scan-meta.js';
import type { ScanResult } from './reporter.stage.js';

/**
 * Walks a folder under the samples root and hands every file to its tenant's converter.
 * Shared: one explorer serves every tenant; the tenant travels in the job and the broker routes
 * each emitted conversion to that tenant's queue, or to its pdf queue by the `mime` header.
 *
 * Job `scan.folder`, args `[folder]` (relative to the samples root), or `[]` for the tenant's own
 * folder (what the nightly schedule of every tenant sends: config/pipeline.json). Emits `doc.convert`
 * `[{ base64 }, documentName]` per file: the document's bytes. Options: `samplesDir` (relative to
 * the working directory; default the bundled `stages/samples`). Returns the scan's id (this job's)
 * and how many documents it sent: a workflow's report step gets it (`parent_results`).
 */
/** Documents read and on their way at once. */
const IN_FLIGHT = 32;

@Stage({ name: 'explorer', input: 'scan-specs', outputs: ['conversions'], types: ['scan.folder'] })
export class Explorer implements StageHandler {
  private readonly root: string;

  constructor(@inject(STAGE_OPTIONS) options: Record<string, unknown>, @inject(LOGGER) log: Logger) {
    if (options.samplesDir !== undefined && typeof options.samplesDir !== 'string') {
      throw new TypeError('stages.explorer.options.samplesDir must be a string');
    }
    this.root = path.resolve(options.samplesDir ?? BUNDLED_SAMPLES_DIR);
    log.debug('explorer samples root', { root: this.root });
  }

  async handle(job: Job, ctx: StageContext): Promise<ScanResult> {
    // Conversions are tenant-scoped: without a tenant there is nowhere to send them.
    if (job.tenant === undefined) throw new NonRetryableError('a scan needs a tenant', 'InvalidScanSpec');
    const [folder = job.tenant] = job.args;
    if (typeof folder !== 'string') throw new NonRetryableError('args[0] must be the folder to scan', 'InvalidScanSpec');
    const dir = path.resolve(this.root, folder);
    // The folder comes from whoever can publish a job: never let it climb out of the root.
    if (dir !== this.root && !dir.startsWith(this.root + path.sep)) {
      throw new NonRetryableError(`folder "${folder}" is outside the samples root`, 'InvalidScanSpec');
    }
    const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
      // A missing folder will not appear by retrying; anything else (EMFILE...) might pass.
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') throw new NonRetryableError(`folder "${folder}" not found`, 'InvalidScanSpec');
      throw err;
    });
    const files = entries
      .filter((entry) => entry.isFile() && !entry.name.startsWith('.'))
      .map((entry) => path.join(entry.parentPath, entry.name))
      .sort();
    // The scan job's id names the scan: unique, and known to whoever published it.
    const meta: ScanMeta = { scan_id: job.id, scan_total: files.length };
    ctx.log.info('scanning folder', { folder, files: files.length });
    // The document itself travels, so a converter needs no share with the explorer: inline when
    // small, by reference to the payload store above `payloads.threshold` (docs/payloads.md).
    // A few at a time: each is read whole into memory to be sent, and waiting for each confirm
    // in turn would trickle a large folder out one round trip per file.
    const sending = new Set<Promise<unknown>>();
    for (const file of files) {
      if (sending.size >= IN_FLIGHT) await Promise.race(sending);
      const content = { base64: (await readFile(file)).toString('base64') };
      const sent: Promise<unknown> = ctx
        .emit('conversions', {
          type: 'doc.convert',
          args: [content, path.relative(dir, file).split(path.sep).join('/')],
          meta: { ...meta },
          headers: { mime: mimeOf(file) },
        })
        .finally(() => sending.delete(sent));
      sending.add(sent);
    }
    await Promise.all(sending);
    return { scan_id: job.id, folder, documents: files.length };
  }
}
