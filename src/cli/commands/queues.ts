import { loadConfig } from '../../config/load-config.js';
import { StagecoachError, TenantError } from '../../errors/errors.js';
import { formatAlarms, readBrokerAlarms } from '../../inspect/broker-alarms.js';
import { DEFAULT_TABLE_ROWS, formatQueues } from '../../inspect/format-queues.js';
import { inspectQueues } from '../../inspect/inspect-queues.js';
import { managementClientOf } from '../../broker-management/management-client.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/**
 * `stagecoach queues [--tenant T] [--json]`: every physical work queue under the prefix, on
 * stdout (a table, or JSON for machines). `--tenant` (else `STAGECOACH_TENANT`, as for every
 * command taking `--tenant`) keeps one tenant's queues. A resource alarm of the broker (which
 * blocks every publishing connection) comes first, one line per alarm (on stderr with `--json`,
 * whose output stays the list of queues).
 */
export async function queues(opts: { tenant?: string; json?: boolean; config?: string; limit?: string; offset?: string }): Promise<number> {
  const page = { limit: count('--limit', opts.limit, DEFAULT_TABLE_ROWS), offset: count('--offset', opts.offset, 0) };
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const api = managementClientOf(config);
  const [reports, alarms] = await Promise.all([
    inspectQueues(config, { api, ...(tenant === undefined ? {} : { tenant }) }),
    readBrokerAlarms(api),
  ]);
  if (tenant !== undefined && reports.length === 0 && !config.tenants.includes(tenant)) {
    // A typo would otherwise print an empty table and exit 0.
    throw new TenantError(tenant, `--tenant: tenant "${tenant}" is neither configured nor has queues under prefix "${config.prefix}"`);
  }
  if (opts.json === true) {
    process.stderr.write(formatAlarms(alarms));
    process.stdout.write(`${JSON.stringify(reports, null, 2)}\n`);
  } else {
    process.stdout.write(formatAlarms(alarms) + formatQueues(reports, page));
  }
  return EXIT_OK;
}

/** A whole number of rows from an option, or `fallback` when it is absent. */
function count(option: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new StagecoachError('INVALID_REQUEST', `${option} must be a whole number of rows, got "${value}"`);
  return n;
}
