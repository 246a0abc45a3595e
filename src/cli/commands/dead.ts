import { listDeadLetters, purgeDeadLetters, retryDeadLetters } from '../../dead-letters/dead-letter-actions.js';
import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';
import type { PayloadInfo } from '../../payload/payload-info.js';

export interface DeadOptions {
  tenant?: string;
  json?: boolean;
  limit: string;
  config?: string;
}

/** `stagecoach dead list|retry|purge <queue> [--tenant T] [--json]` */
export async function dead(action: string, queue: string, opts: DeadOptions): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const log = createLogger({ service: 'stagecoach', command: `dead ${action}` });
  const print = (human: string, machine: unknown): void => {
    process.stdout.write(opts.json ? `${JSON.stringify(machine, null, 2)}\n` : human);
  };
  switch (action) {
    case 'list': {
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1)
        throw new StagecoachError('INVALID_REQUEST', `--limit must be a positive integer, got "${opts.limit}"`);
      const entries = await listDeadLetters(config, queue, tenant, log, limit);
      const lines = entries.map(
        (e) =>
          `${e.id ?? '-'}\t${e.tenant ?? '-'}\t${e.type ?? '-'}\tattempt ${e.attempt ?? '-'}\t${e.errorType ?? '-'}: ${e.errorMessage ?? ''}${payloadColumn(e.payload)}\n`,
      );
      print(`${lines.join('')}${entries.length} dead\n`, entries);
      return EXIT_OK;
    }
    case 'retry': {
      const result = await retryDeadLetters(config, queue, tenant, log);
      print(`retried ${result.retried}, kept ${result.kept} (not jobs)\n`, result);
      return EXIT_OK;
    }
    case 'purge': {
      const purged = await purgeDeadLetters(config, queue, tenant, log);
      print(`purged ${purged}\n`, { purged });
      return EXIT_OK;
    }
    default:
      throw new StagecoachError('INVALID_REQUEST', `dead: unknown action "${action}" (list, retry or purge)`);
  }
}

/** The table's last column for a job sent by reference: its payload, and whether it is still stored. */
function payloadColumn(payload: PayloadInfo | undefined): string {
  if (payload === undefined) return '';
  const size = payload.size === null ? '' : ` ${payload.size} B`;
  return `\tpayload ${payload.ref}${size} ${payload.stored ? 'stored' : 'missing'}`;
}
