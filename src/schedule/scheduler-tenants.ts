import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { TenantMembership, type TenantSet } from '../runner/process/tenant-membership.js';

/** What the leader does when the set of tenants changes while it runs. */
export interface TenantChanges {
  joined(tenant: string): Promise<void>;
  left(tenant: string): Promise<void>;
}

/**
 * The tenants per-tenant schedules fire for: every tenant configured or provisioned on the broker,
 * followed while the leader runs as `run --all-tenants` follows them (TenantMembership: the
 * `tenant.provisioned` and `tenant.retired` events, and a listing every 30 s). A tenant that joins
 * fires from its next occurrence on; one that leaves fires no more.
 */
export class SchedulerTenants implements TenantSet {
  private readonly members = new Set<string>();
  private list: string[] | undefined;
  private membership: TenantMembership | undefined;

  private constructor(
    private readonly config: CompiledConfig,
    private readonly changes: TenantChanges,
  ) {}

  static async start(config: CompiledConfig, connection: AmqpConnection, log: Logger, changes: TenantChanges): Promise<SchedulerTenants> {
    const tenants = new SchedulerTenants(config, changes);
    const membership = new TenantMembership(tenants, { config, log });
    // The tenants there are now are members from the start, not joiners.
    for (const tenant of await membership.current()) tenants.members.add(tenant);
    tenants.membership = membership;
    await membership.attach(connection);
    return tenants;
  }

  get tenants(): readonly string[] {
    return (this.list ??= [...this.members].sort());
  }

  has(tenant: string): boolean {
    return this.members.has(tenant);
  }

  /** The tenant's own time zone (`tenants[].timezone`), if the configuration names one. */
  zoneOf(tenant: string): string | undefined {
    return this.config.tenantZones.get(tenant);
  }

  async addTenant(tenant: string): Promise<boolean> {
    if (this.members.has(tenant)) return false;
    this.members.add(tenant);
    this.list = undefined;
    await this.changes.joined(tenant);
    return true;
  }

  async removeTenant(tenant: string): Promise<boolean> {
    if (!this.members.delete(tenant)) return false;
    this.list = undefined;
    await this.changes.left(tenant);
    return true;
  }

  async close(): Promise<void> {
    await this.membership?.close();
  }
}
