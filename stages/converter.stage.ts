import { readFile } from 'node:fs/promises';
import { NonRetryableError, Stage, type Job, type StageContext, type StageHandler } from '../src/index.js';
import { TextExtractor } from './lib/extract-text.js';
import { scanMeta } from './lib/scan-meta.js';

/**
 * Turns a document into plain text. Tenant-scoped, and run twice per tenant: on the general
 * `conversions` queue and on its `pdf` variant queue, which the broker fills with the jobs whose
 * `mime` header is application/pdf, so slow PDF parsing never holds up the small text files.
 * The same class serves both; the mime header says which extraction to run.
 *
 * Job `doc.convert`, args `[source, documentName]`, header `mime`: `source` is the document
 * itself, `{ base64 }` (as the explorer sends it; a large one arrives by reference and is loaded
 * before this runs), or the path of a file this process can read.
 * Emits `doc.text` `[documentName, text]` to `representations`, keeping the scan meta.
 */
@Stage({ name: 'converter', input: 'conversions', outputs: ['representations'], types: ['doc.convert'] })
export class Converter implements StageHandler {
  // Injected by class (the stage container autobinds it): a deployment can rebind a richer one.
  constructor(private readonly extractor: TextExtractor) {}

  async handle(job: Job, ctx: StageContext): Promise<void> {
    const [source, name] = job.args;
    const inline = typeof source === 'object' && source !== null && typeof (source as { base64?: unknown }).base64 === 'string';
    if ((typeof source !== 'string' && !inline) || typeof name !== 'string') {
      throw new NonRetryableError('args must be [{ base64 } or absolutePath, documentName]', 'InvalidConversion');
    }
    const mime = typeof ctx.headers.mime === 'string' ? ctx.headers.mime : 'application/octet-stream';
    // Checked before reading: an unsupported file may be large, and no retry will make it supported.
    if (!this.extractor.supports(mime)) throw new NonRetryableError(`no text extractor for "${mime}"`, 'UnsupportedMime');
    let text: string;
    try {
      const bytes = inline ? Buffer.from((source as { base64: string }).base64, 'base64') : await readFile(source as string);
      text = await this.extractor.extract(mime, bytes);
    } catch (err) {
      // A corrupt document stays corrupt; a read error (a share that is briefly away) may pass.
      if (err instanceof SyntaxError || (err as Error).name === 'InvalidPDFException') {
        throw new NonRetryableError(`${name}: ${(err as Error).message}`, 'UnreadableDocument');
      }
      throw err;
    }
    ctx.log.debug('converted', { document: name, mime, chars: text.length });
    await ctx.emit('representations', { type: 'doc.text', args: [name, text], meta: { ...scanMeta(job.meta), mime } });
  }
}
