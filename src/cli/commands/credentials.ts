import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { managementApiOf } from '../../security/management-api.js';
import { issueCredentials, userForRole, type CredentialRole } from '../../security/tenant-users.js';
import { EXIT_OK } from '../exit-codes.js';
import { ADMIN_TOKEN_ENV } from '../../admin-api/bearer-auth.js';
import { tenantToken } from '../../admin-api/tenant-tokens.js';
import { checkTenantSlug } from '../../util/tenant-slug.js';

const ROLES: readonly string[] = ['producer', 'stage', 'internal', 'http'];

/**
 * `stagecoach credentials <T> [--role producer|stage]` (and `credentials --role internal`): sets a
 * fresh password for that broker user and prints its AMQP URL on stdout, and nothing else there.
 * `--role http` prints a tenant's bearer token for the OJS HTTP binding instead.
 * The password is never logged: log lines name the user only.
 */
export async function credentials(tenant: string | undefined, opts: { role: string; config?: string }): Promise<number> {
  if (!ROLES.includes(opts.role)) {
    throw new StagecoachError('INVALID_REQUEST', `--role must be producer, stage, internal or http, got "${opts.role}"`);
  }
  const config = await loadConfig(opts.config);
  if (opts.role === 'http') return httpToken(config.prefix, tenant ?? process.env.STAGECOACH_TENANT);
  const role = opts.role as CredentialRole;
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

/**
 * `credentials <T> --role http`: the OJS HTTP binding's bearer token for tenant T (tenant-tokens.ts),
 * derived from the admin token (`STAGECOACH_ADMIN_TOKEN`, needed here): no broker user, nothing
 * stored; rotating the admin token revokes every one.
 */
function httpToken(prefix: string, tenant: string | undefined): number {
  if (tenant === undefined)
    throw new StagecoachError('INVALID_REQUEST', 'credentials --role http needs a tenant: credentials <tenant> --role http');
  checkTenantSlug(tenant, 'tenant');
  const adminToken = process.env[ADMIN_TOKEN_ENV];
  if (adminToken === undefined || adminToken === '') {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `credentials --role http derives the token from the admin token: set ${ADMIN_TOKEN_ENV} as \`stagecoach admin\` has it`,
    );
  }
  process.stdout.write(`${tenantToken(adminToken, prefix, tenant)}\n`);
  return EXIT_OK;
}
