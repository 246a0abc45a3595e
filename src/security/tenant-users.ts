import { randomBytes } from 'node:crypto';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { inParallel } from '../util/in-parallel.js';
import { tenantUserName, TENANT_ROLES, userOfAmqpUrl, vhostOfAmqpUrl, type TenantRole } from './broker-users.js';
import type { ManagementClient } from '../broker-management/management-client.js';
import { internalUserGrant, tenantUserGrant, type UserGrant } from './permissions.js';

/** Every role `stagecoach credentials` knows: a tenant's two users and the internal user. */
export type CredentialRole = TenantRole | 'internal';

/** Management API calls `provision` has in flight for users: enough to hide round trips, few enough not to swamp the broker. */
const USER_CALLS_AT_ONCE = 8;

/** A password nobody has seen: 192 random bits, URL-safe. */
function freshPassword(): string {
  return randomBytes(24).toString('base64url');
}

/** The users and grants `provision` sets up for `tenants`: each tenant's two users and the internal user. */
export function brokerUserGrants(config: CompiledConfig, tenants: readonly string[]): UserGrant[] {
  return [...tenants.flatMap((tenant) => TENANT_ROLES.map((role) => tenantUserGrant(config, role, tenant))), internalUserGrant(config)];
}

/**
 * Creates the broker users of `tenants` (and the internal user) and sets their permissions,
 * through the management API. Idempotent: an existing user keeps its password, so running
 * `provision` again never logs out a running stage. A new user gets a random password that is
 * never shown: it cannot log in until `stagecoach credentials` sets one and prints it.
 * @returns the users set up.
 */
export async function provisionBrokerUsers(config: CompiledConfig, api: ManagementClient, tenants: readonly string[]): Promise<string[]> {
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const grants = brokerUserGrants(config, tenants);
  const operators = new Set([userOfAmqpUrl(config.broker.url), config.security.operatorUser]);
  const clash = grants.find((grant) => operators.has(grant.user));
  if (clash !== undefined) {
    // Restricting the user we provision as (or the operator) would lock the operator out.
    throw new StagecoachError('INVALID_REQUEST', `broker user "${clash.user}" is the operator's: it cannot be a tenant or internal user`);
  }
  // One listing, then a few calls at once: a call per user in a row is minutes at 1,000 tenants.
  const existing = new Set(await api.listUsers());
  await inParallel(grants, USER_CALLS_AT_ONCE, async (grant) => {
    if (!existing.has(grant.user)) await api.putUser(grant.user, freshPassword());
    await api.putPermissions(vhost, grant.user, grant.permissions);
    for (const topic of grant.topics) await api.putTopicPermission(vhost, grant.user, topic);
  });
  return grants.map((grant) => grant.user);
}

/** The broker user of a role: `<prefix>.<role>.<tenant>`, or the internal user. */
export function userForRole(config: CompiledConfig, role: CredentialRole, tenant: string | undefined): string {
  if (role === 'internal') return config.security.internalUser;
  if (tenant === undefined) throw new StagecoachError('INVALID_REQUEST', `the ${role} user belongs to a tenant: name it`);
  return tenantUserName(config.prefix, role, tenant);
}

/**
 * Sets a fresh password for a user `provision` created and returns the AMQP URL that logs in
 * with it (`broker.url` with that user and password). The password exists nowhere else: the
 * caller prints it once. A user that does not exist is not created here (it would have no
 * permissions): NOT_FOUND.
 */
export async function issueCredentials(config: CompiledConfig, api: ManagementClient, user: string): Promise<string> {
  if (!(await api.userExists(user))) {
    throw new StagecoachError('NOT_FOUND', `no broker user "${user}": run \`stagecoach provision\` (with security.tenantUsers) first`);
  }
  const password = freshPassword();
  await api.putUser(user, password);
  const url = new URL(config.broker.url);
  url.username = encodeURIComponent(user);
  url.password = password;
  return url.toString();
}
