import { loadConfig } from '../../config/load-config.js';
import { TenantError } from '../../errors/errors.js';
import { formatAlarms, readBrokerAlarms } from '../../inspect/broker-alarms.js';
import { formatQueues } from '../../inspect/format-queues.js';
import { inspectQueues } from '../../inspect/inspect-queues.js';
import { managementApiOf } from '../../security/management-api.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/**
 * `stagecoach queues [--tenant T] [--json]`: every physical work queue under the prefix, on
 * stdout (a table, or JSON for machines). `--tenant` (else `STAGECOACH_TENANT`, as for every
 * command taking `--tenant`) keeps one tenant's queues. A resource alarm of the broker (which
 * blocks every publishing connection) comes first, one line per alarm (on stderr with `--json`,
 * whose output stays the list of queues).
 */
export async function queues(opts: { tenant?: string; json?: boolean; config?: string }): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const api = managementApiOf(config);
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
    process.stdout.write(formatAlarms(alarms) + formatQueues(reports));
  }
  return EXIT_OK;
}
