import type { CompiledConfig } from '../config/config.types.js';

/** The two broker users every tenant gets with `security.tenantUsers`. */
export type TenantRole = 'producer' | 'stage';
export const TENANT_ROLES: readonly TenantRole[] = ['producer', 'stage'];

/**
 * `<prefix>.producer.<tenant>` / `<prefix>.stage.<tenant>`. Prefixes and tenant slugs have no
 * dots, so a name reads back to one role and one tenant only.
 */
export function tenantUserName(prefix: string, role: TenantRole, tenant: string): string {
  return `${prefix}.${role}.${tenant}`;
}

/** The user an AMQP URL logs in as; amqplib logs in as guest when the URL names none. */
export function userOfAmqpUrl(url: string): string {
  return decodeURIComponent(new URL(url).username) || 'guest';
}

/** The virtual host of an AMQP URL, as amqplib reads it: the path without its slash, `/` if empty. */
export function vhostOfAmqpUrl(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1)) || '/';
}

/**
 * Who is who on the broker for one configuration, with `security.tenantUsers`:
 * - `self`: the user `broker.url` logs in as, which the broker writes into (and validates as)
 *   the `user_id` of everything this process publishes;
 * - `selfTenant`: the tenant `self` belongs to when it is a producer or stage user;
 * - trusted users, allowed to act for every tenant: the operator and the internal user.
 *
 * `mayActFor` is what a stage asks of every job: a Set lookup for a tenant-scoped queue, and two
 * string comparisons without allocation for a shared one.
 */
export class BrokerIdentities {
  readonly self: string;
  readonly selfTenant: string | undefined;
  /** True when `self` is the operator or the internal user. */
  readonly selfTrusted: boolean;
  readonly internal: string;
  readonly operator: string | undefined;
  private readonly prefix: string;
  private readonly producerBase: string;
  private readonly stageBase: string;

  constructor(config: CompiledConfig) {
    this.prefix = config.prefix;
    this.internal = config.security.internalUser;
    this.operator = config.security.operatorUser;
    this.producerBase = `${config.prefix}.producer.`;
    this.stageBase = `${config.prefix}.stage.`;
    this.self = userOfAmqpUrl(config.broker.url);
    this.selfTrusted = this.trusted(this.self);
    this.selfTenant = this.selfTrusted ? undefined : this.tenantOf(this.self);
  }

  trusted(user: string): boolean {
    return user === this.internal || user === this.operator;
  }

  /** The tenant of a producer or stage user of this prefix; undefined for any other user. */
  tenantOf(user: string): string | undefined {
    for (const base of [this.producerBase, this.stageBase]) {
      if (user.length > base.length && user.startsWith(base)) return user.slice(base.length);
    }
    return undefined;
  }

  /** The users whose jobs a queue of `tenant` takes. */
  allowedFor(tenant: string): ReadonlySet<string> {
    const users = new Set([this.internal, ...TENANT_ROLES.map((role) => tenantUserName(this.prefix, role, tenant))]);
    if (this.operator !== undefined) users.add(this.operator);
    return users;
  }

  /**
   * Whether a job for `tenant` published by `user` (the validated `user_id`) may run: the
   * tenant's own producer or stage user, or a trusted user. A job without a tenant may come from
   * a trusted user only; a message without `user_id` from nobody.
   */
  mayActFor(tenant: string | undefined, user: unknown): boolean {
    if (typeof user !== 'string') return false;
    if (this.trusted(user)) return true;
    if (tenant === undefined || !user.endsWith(tenant)) return false;
    const base = user.length - tenant.length;
    return (
      (base === this.producerBase.length && user.startsWith(this.producerBase)) ||
      (base === this.stageBase.length && user.startsWith(this.stageBase))
    );
  }
}

/** Made once per configuration: routing asks for every published job. */
const cache = new WeakMap<CompiledConfig, BrokerIdentities>();
export function identitiesOf(config: CompiledConfig): BrokerIdentities {
  let identities = cache.get(config);
  if (identities === undefined) cache.set(config, (identities = new BrokerIdentities(config)));
  return identities;
}
