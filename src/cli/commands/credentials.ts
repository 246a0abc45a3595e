import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { managementApiOf } from '../../security/management-api.js';
import { issueCredentials, userForRole, type CredentialRole } from '../../security/tenant-users.js';
import { EXIT_OK } from '../exit-codes.js';

const ROLES: readonly string[] = ['producer', 'stage', 'internal'];

/**
 * `stagecoach credentials <T> [--role producer|stage]` (and `credentials --role internal`): sets a
 * fresh password for that broker user and prints its AMQP URL on stdout, and nothing else there.
 * The password is never logged: log lines name the user only.
 */
export async function credentials(tenant: string | undefined, opts: { role: string; config?: string }): Promise<number> {
  if (!ROLES.includes(opts.role)) {
    throw new StagecoachError('INVALID_REQUEST', `--role must be producer, stage or internal, got "${opts.role}"`);
  }
  const role = opts.role as CredentialRole;
  const config = await loadConfig(opts.config);
  if (!config.security.tenantUsers) {
    throw new StagecoachError('INVALID_REQUEST', 'credentials needs security.tenantUsers: true in the configuration');
  }
  if (role === 'internal' && tenant !== undefined) {
    throw new StagecoachError('INVALID_REQUEST', 'the internal user serves every tenant: drop the tenant');
  }
  const user = userForRole(config, role, tenant ?? process.env.STAGECOACH_TENANT);
  const url = await issueCredentials(config, managementApiOf(config), user);
  createLogger({ service: 'stagecoach', command: 'credentials' }).info('fresh password set', { user });
  process.stdout.write(`${url}\n`);
  return EXIT_OK;
}
