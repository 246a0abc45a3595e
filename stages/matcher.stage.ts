import { NonRetryableError, Stage, type Job, type StageContext, type StageHandler } from '../src/index.js';
import { findSensitive } from './lib/find-sensitive.js';
import { scanMeta } from './lib/scan-meta.js';

/**
 * Finds e-mail addresses, payment cards (Luhn-checked, reported masked) and CPR numbers (with a
 * real date) in a document's text. Tenant-scoped, so one tenant's backlog never delays another.
 *
 * Job `doc.text`, args `[documentName, text]`. Emits one `doc.matches`
 * `[documentName, findings]` per document, also with no findings, so that the exporter can
 * count the documents of a scan.
 */
@Stage({ name: 'matcher', input: 'representations', outputs: ['matches'], types: ['doc.text'] })
export class Matcher implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    const [name, text] = job.args;
    if (typeof name !== 'string' || typeof text !== 'string') {
      throw new NonRetryableError('args must be [documentName, text]', 'InvalidRepresentation');
    }
    await ctx.emit('matches', { type: 'doc.matches', args: [name, findSensitive(text)], meta: scanMeta(job.meta) });
  }
}
