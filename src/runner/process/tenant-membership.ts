import type { Channel } from 'amqplib';
import type { AmqpConnection } from '../../broker/amqp-connection.js';
import type { CompiledConfig } from '../../config/config.types.js';
import type { Logger } from '../../logging/logger.js';
import { vhostOfAmqpUrl } from '../../security/broker-users.js';
import { managementClientOf, type ManagementClient } from '../../broker-management/management-client.js';
import { BrokerNames, parseBrokerName } from '../../topology/names.js';
import { isTenantSlug } from '../../util/tenant-slug.js';

/** How often the set is read again in full, for an event missed (published while reconnecting). @defaultValue 30 s */
export const DEFAULT_RESYNC_MS = 30_000;

/** What membership changes: the tenants of a pooled process (PooledRoster). */
export interface TenantSet {
  readonly tenants: readonly string[];
  addTenant(tenant: string): Promise<boolean>;
  removeTenant(tenant: string): Promise<boolean>;
}

export interface TenantMembershipOptions {
  config: CompiledConfig;
  log: Logger;
  /** @defaultValue DEFAULT_RESYNC_MS */
  resyncMs?: number;
  /** @defaultValue the management API of `broker.management` */
  api?: ManagementClient;
}

/**
 * The tenants an `--all-tenants` process serves: the configured ones, and every one provisioned
 * on the broker (its `<prefix>.tenant.<T>` exchange exists, which `provision`, `apply` and every
 * stage of the tenant declare, and `tenant retire` deletes).
 *
 * How it learns the set: at start, one listing of the exchanges through the management API; while
 * it runs, the `tenant.provisioned` and `tenant.retired` events on `<prefix>.events` (a private
 * queue bound to both, re-bound on every connection), so a change is served in well under a
 * second; and a full listing again every `resyncMs` and after every reconnection, for an event
 * published while it was not listening (events are best-effort). A configured tenant is always
 * served; a tenant retired is released (its runner drains within the grace period).
 */
export class TenantMembership {
  private readonly api: ManagementClient;
  private readonly names: BrokerNames;
  private channel: Channel | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Changes run one at a time, in the order they were learnt. */
  private chain: Promise<unknown> = Promise.resolve();
  /** Tenants terminated on this process: not served again until a `tenant.provisioned` names them. */
  private readonly excluded = new Set<string>();

  constructor(
    private readonly roster: TenantSet,
    private readonly options: TenantMembershipOptions,
  ) {
    this.api = options.api ?? managementClientOf(options.config);
    this.names = new BrokerNames(options.config.prefix);
  }

  /**
   * The tenants to serve now: configured, plus provisioned. Without the management API only the
   * configured ones, and a warning: the events still bring the others as they are provisioned.
   */
  async current(): Promise<string[]> {
    const configured = this.options.config.tenants;
    try {
      return [...new Set([...configured, ...(await this.provisioned())])].sort();
    } catch (err) {
      this.options.log.warn('provisioned tenants not listed (management API); serving the configured ones', {
        err: (err as Error).message,
      });
      return [...configured];
    }
  }

  /** Listens for tenant events on `connection` (at start and after every reconnection), then reads the set again. */
  async attach(connection: AmqpConnection): Promise<void> {
    if (this.closed) return;
    try {
      await this.listen(connection);
    } catch (err) {
      // A user that may not declare or bind on the events exchange: the periodic listings still
      // bring every change, only later.
      this.options.log.warn('tenant events not followed; reading the tenants every resync period instead', {
        err: (err as Error).message,
      });
    }
    this.schedule(0);
  }

  private async listen(connection: AmqpConnection): Promise<void> {
    const channel = await connection.createChannel();
    this.channel = channel;
    channel.on('error', (err: Error) => this.options.log.warn('membership channel error', { err: err.message }));
    // Declared, not checked: a broker that never saw an event yet has no events exchange.
    await channel.assertExchange(this.names.events, 'topic', { durable: this.options.config.durable });
    const { queue } = await channel.assertQueue('', { exclusive: true, autoDelete: true, durable: false });
    await channel.bindQueue(queue, this.names.events, 'tenant.provisioned');
    await channel.bindQueue(queue, this.names.events, 'tenant.retired');
    await channel.consume(
      queue,
      (message) => {
        if (message === null) return;
        this.onEvent(message.fields.routingKey, message.content);
      },
      { noAck: true },
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const channel = this.channel;
    this.channel = undefined;
    await channel?.close().catch(() => undefined);
    await this.chain;
  }

  /** `terminate --tenant T`: T is released and stays so, whatever the listings say, until provisioned again. */
  exclude(tenant: string): void {
    this.excluded.add(tenant);
  }

  private onEvent(type: string, content: Buffer): void {
    let tenant: unknown;
    try {
      tenant = (JSON.parse(content.toString('utf8')) as { data?: { tenant?: unknown } }).data?.tenant;
    } catch {
      tenant = undefined;
    }
    if (typeof tenant !== 'string' || !isTenantSlug(tenant)) {
      this.options.log.warn('ignored a tenant event without a valid tenant', { event_type: type });
      return;
    }
    if (type === 'tenant.provisioned') {
      this.excluded.delete(tenant);
      this.enqueue(() => this.roster.addTenant(tenant));
    } else if (type === 'tenant.retired' && !this.options.config.tenants.includes(tenant))
      this.enqueue(() => this.roster.removeTenant(tenant));
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    if (this.closed) return;
    this.timer = setTimeout(() => this.enqueue(() => this.resync()), delayMs);
    this.timer.unref();
  }

  /** Brings the roster in line with the broker's set. Not when the listing fails: nothing is released on a guess. */
  private async resync(): Promise<void> {
    try {
      const wanted = new Set([...this.options.config.tenants, ...(await this.provisioned())].filter((t) => !this.excluded.has(t)));
      // Sets, not a scan of the roster per tenant: every 30 s, 10,000 tenants would make 10^8 steps.
      const served = new Set(this.roster.tenants);
      for (const tenant of wanted) if (!served.has(tenant)) await this.roster.addTenant(tenant);
      for (const tenant of served) if (!wanted.has(tenant)) await this.roster.removeTenant(tenant);
    } catch (err) {
      this.options.log.warn('tenants not read again (management API)', { err: (err as Error).message });
    } finally {
      this.schedule(this.options.resyncMs ?? DEFAULT_RESYNC_MS);
    }
  }

  private enqueue(change: () => Promise<unknown>): void {
    this.chain = this.chain
      .then(change)
      .catch((err: unknown) => this.options.log.error('tenant membership change failed', { err: (err as Error).message }));
  }

  private async provisioned(): Promise<string[]> {
    const prefix = this.options.config.prefix;
    const exchanges = await this.api.listExchangeNames(vhostOfAmqpUrl(this.options.config.broker.url));
    const tenants: string[] = [];
    for (const name of exchanges) {
      const parsed = parseBrokerName(prefix, name);
      if (parsed?.kind === 'tenant' && parsed.tenant !== undefined && isTenantSlug(parsed.tenant)) tenants.push(parsed.tenant);
    }
    return tenants;
  }
}
