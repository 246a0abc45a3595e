import type { AmqpConnection } from '../../broker/amqp-connection.js';
import { isOpen } from '../../broker/connection-state.js';
import { BrokerFlags } from '../../flags/broker-flags.js';
import type { CompiledConfig } from '../../config/config.types.js';
import { TenantError } from '../../errors/errors.js';
import type { Logger } from '../../logging/logger.js';

/**
 * Before anything is declared: every tenant of the process is configured or provisioned (its
 * tenant exchange exists; `provision` and every stage of the tenant declare it), so that a typo
 * fails the start instead of a stage creating that tenant's queues and waiting on them for ever.
 * Checked once, at start, and again on the next connection if this one drops mid-check.
 * @param next the first connection after a lost one (GroupConnection.next)
 * @returns the connection the check succeeded on.
 * @throws TenantError naming the first unknown tenant and how to provision it.
 */
export async function checkKnownTenants(
  config: CompiledConfig,
  tenants: ReadonlyArray<string | undefined>,
  first: AmqpConnection,
  next: (lost: AmqpConnection) => Promise<AmqpConnection>,
  log: Logger,
): Promise<AmqpConnection> {
  const configured = new Set(config.tenants);
  const unknown = [...new Set(tenants)].filter((tenant): tenant is string => tenant !== undefined && !configured.has(tenant));
  if (unknown.length === 0) return first;
  let connection = first;
  for (;;) {
    const flags = new BrokerFlags(connection, { prefix: config.prefix });
    try {
      for (const tenant of unknown) {
        if (!(await flags.isSet({ kind: 'tenant-provisioned', tenant }))) {
          throw new TenantError(
            tenant,
            `tenant "${tenant}" is neither configured (tenants in ${config.source}) nor provisioned on the broker: ` +
              `run \`stagecoach provision --tenant ${tenant}\` first`,
          );
        }
      }
      return connection;
    } catch (err) {
      if (err instanceof TenantError || isOpen(connection)) throw err;
      log.warn('connection lost while checking tenants; checking on the next connection', { err: (err as Error).message });
      connection = await next(connection);
    } finally {
      await flags.close();
    }
  }
}
