import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { managementClientOf } from '../../broker-management/management-client.js';
import { issueCredentials, userForRole, type CredentialRole } from '../../security/tenant-users.js';
import { EXIT_OK } from '../exit-codes.js';
import { ADMIN_TOKEN_ENV } from '../../http-api/bearer-auth.js';
import { tenantToken, viewerToken } from '../../http-api/tenant-tokens.js';
import { checkTenantSlug } from '../../util/tenant-slug.js';

const ROLES: readonly string[] = ['producer', 'stage', 'internal', 'http', 'viewer'];

/**
 * `stagecoach credentials <T> [--role producer|stage]` (and `credentials --role internal`): sets a
 * fresh password for that broker user and prints its AMQP URL on stdout, and nothing else there.
 * `--role http` prints a tenant's bearer token for the admin port instead, `--role viewer` a
 * read-only token for a person or a dashboard (docs/security.md, "The admin port").
 * The password is never logged: log lines name the user only.
 */
export async function credentials(tenant: string | undefined, opts: { role: string; config?: string }): Promise<number> {
  if (!ROLES.includes(opts.role)) {
    throw new StagecoachError('INVALID_REQUEST', `--role must be producer, stage, internal, http or viewer, got "${opts.role}"`);
  }
  const config = await loadConfig(opts.config);
  if (opts.role === 'http' || opts.role === 'viewer') return httpToken(config.prefix, opts.role, tenant ?? process.env.STAGECOACH_TENANT);
  const role = opts.role as CredentialRole;
  if (!config.security.tenantUsers) {
    throw new StagecoachError('INVALID_REQUEST', 'credentials needs security.tenantUsers: true in the configuration');
  }
  if (role === 'internal' && tenant !== undefined) {
    throw new StagecoachError('INVALID_REQUEST', 'the internal user serves every tenant: drop the tenant');
  }
  const user = userForRole(config, role, tenant ?? process.env.STAGECOACH_TENANT);
  const url = await issueCredentials(config, managementClientOf(config), user);
  createLogger({ service: 'stagecoach', command: 'credentials' }).info('fresh password set', { user });
  process.stdout.write(`${url}\n`);
  return EXIT_OK;
}

/**
 * `credentials <T> --role http`: the admin port's bearer token confining its holder to tenant T;
 * `credentials <name> --role viewer`: a read-only token for every tenant (tenant-tokens.ts). Both
 * are derived from the admin token (`STAGECOACH_ADMIN_TOKEN`, needed here): no broker user,
 * nothing stored; rotating the admin token revokes every one.
 */
function httpToken(prefix: string, role: 'http' | 'viewer', name: string | undefined): number {
  const what = role === 'http' ? 'tenant' : 'name';
  if (name === undefined)
    throw new StagecoachError('INVALID_REQUEST', `credentials --role ${role} needs a ${what}: credentials <${what}> --role ${role}`);
  checkTenantSlug(name, what);
  const adminToken = process.env[ADMIN_TOKEN_ENV];
  if (adminToken === undefined || adminToken === '') {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `credentials --role ${role} derives the token from the admin token: set ${ADMIN_TOKEN_ENV} as \`stagecoach admin\` has it`,
    );
  }
  process.stdout.write(`${role === 'http' ? tenantToken(adminToken, prefix, name) : viewerToken(adminToken, prefix, name)}\n`);
  return EXIT_OK;
}
