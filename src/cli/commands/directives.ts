import { BATCH_DIRECTIVES, TENANT_DIRECTIVES, type DirectiveResult } from '../../directives/batch-directives.js';
import { loadConfig } from '../../config/load-config.js';
import { createLogger } from '../../logging/logger.js';
import { EXIT_OK } from '../exit-codes.js';
import { checkTenantSlug } from '../../util/tenant-slug.js';

/** `stagecoach batch cancel|pause|resume <B> [--json]` (docs/batches.md). */
export async function batchDirective(
  action: keyof typeof BATCH_DIRECTIVES,
  id: string,
  opts: { json?: boolean; config?: string },
): Promise<number> {
  const config = await loadConfig(opts.config);
  const log = createLogger({ service: 'stagecoach', command: `batch ${action}` });
  print(await BATCH_DIRECTIVES[action](config, id, log), opts.json);
  return EXIT_OK;
}

/** `stagecoach tenant pause|resume <T> [--json]`: every job of the tenant, at every stage. */
export async function tenantDirective(
  action: keyof typeof TENANT_DIRECTIVES,
  name: string,
  opts: { json?: boolean; config?: string },
): Promise<number> {
  const tenant = checkTenantSlug(name, 'tenant');
  const config = await loadConfig(opts.config);
  const log = createLogger({ service: 'stagecoach', command: `tenant ${action}` });
  print(await TENANT_DIRECTIVES[action](config, tenant, log), opts.json);
  return EXIT_OK;
}

const DONE: Record<DirectiveResult['action'], string> = { cancel: 'cancelled', pause: 'paused', resume: 'resumed' };

function print(result: DirectiveResult, json: boolean | undefined): void {
  if (json === true) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const what = result.batch !== undefined ? `batch ${result.batch}` : `tenant ${result.tenant ?? '-'}`;
  const moved =
    result.action === 'pause'
      ? ''
      : `; ${result.moved} parked job(s) sent on${result.kept > 0 ? `, ${result.kept} kept (see the log)` : ''}`;
  process.stdout.write(`${what} ${DONE[result.action]}${moved}\n`);
}
