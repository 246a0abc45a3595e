import { loadConfig } from '../../config/load-config.js';
import { TenantError } from '../../errors/errors.js';
import { formatQueues } from '../../inspect/format-queues.js';
import { inspectQueues } from '../../inspect/inspect-queues.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/**
 * `stagecoach queues [--tenant T] [--json]`: every physical work queue under the prefix, on
 * stdout (a table, or JSON for machines). `--tenant` (else `STAGECOACH_TENANT`, as for every
 * command taking `--tenant`) keeps one tenant's queues.
 */
export async function queues(opts: { tenant?: string; json?: boolean; config?: string }): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const reports = await inspectQueues(config, tenant === undefined ? {} : { tenant });
  if (tenant !== undefined && reports.length === 0 && !config.tenants.includes(tenant)) {
    // A typo would otherwise print an empty table and exit 0.
    throw new TenantError(tenant, `--tenant: tenant "${tenant}" is neither configured nor has queues under prefix "${config.prefix}"`);
  }
  process.stdout.write(opts.json === true ? `${JSON.stringify(reports, null, 2)}\n` : formatQueues(reports));
  return EXIT_OK;
}
