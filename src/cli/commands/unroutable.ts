import { listUnroutable, replayUnroutable } from '../../dead-letters/unroutable.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { EXIT_OK } from '../exit-codes.js';

/** `stagecoach unroutable list [--limit N] [--json]` */
export async function unroutableList(opts: { limit: string; json?: boolean; config?: string }): Promise<number> {
  const limit = Number(opts.limit);
  if (!Number.isInteger(limit) || limit < 1)
    throw new StagecoachError('INVALID_REQUEST', `--limit must be a positive integer, got "${opts.limit}"`);
  const config = await loadConfig(opts.config);
  const entries = await listUnroutable(config, createLogger({ service: 'stagecoach', command: 'unroutable' }), limit);
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
  } else {
    for (const e of entries) process.stdout.write(`${e.messageId ?? '-'}\t${e.tenant ?? '-'}\t${e.queue}\t${e.type ?? '-'}\n`);
    process.stdout.write(`${entries.length} unroutable\n`);
  }
  return EXIT_OK;
}

/** `stagecoach unroutable replay [--json]` */
export async function unroutableReplay(opts: { json?: boolean; config?: string }): Promise<number> {
  const config = await loadConfig(opts.config);
  const result = await replayUnroutable(config, createLogger({ service: 'stagecoach', command: 'unroutable' }));
  process.stdout.write(opts.json ? `${JSON.stringify(result)}\n` : `replayed ${result.replayed}, kept ${result.kept}\n`);
  return EXIT_OK;
}
