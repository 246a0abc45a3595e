import type { AmqpConnection } from '../../broker/amqp-connection.js';
import { declareTopology } from '../../broker/declare-topology.js';
import { checkMinimums, tenantShare } from '../../config/tenant-share.js';
import { isOpen } from '../../broker/connection-state.js';
import type { QueueFullObserver } from '../../broker/confirm-publisher.js';
import type { LoadedStage } from '../../stage/stage-loader.js';
import type { PooledThreadedHandler } from '../../stage/threads/threaded-handler.js';
import { coreTopology, mergeTopologies, withoutSuspectPart } from '../../topology/build-topology.js';
import type { Topology } from '../../topology/topology.types.js';
import { inParallel } from '../../util/in-parallel.js';
import type { LossLedger } from '../loss-ledger.js';
import type { StageRunner, StageRunnerOptions } from '../stage-runner.js';
import { DEFAULT_SUSPECT_CHECK_MS } from '../intake/suspect-watch.js';
import type { StageInstance } from './stage-instance.js';
import { TenantMembership } from './tenant-membership.js';
import { TenantPool } from './tenant-pool.js';
import { TenantRoster, type TenantRosterOptions } from './tenant-roster.js';

export interface PooledGroupOptions {
  stage: LoadedStage;
  variant?: string;
  /** Worker threads serving every tenant, when the stage has `threads` (the caller closes them after `stop()`). */
  threads?: PooledThreadedHandler;
  /**
   * `--all-tenants`: serve every tenant configured or provisioned, follow tenants provisioned and
   * retired while it runs (TenantMembership), and release a runner whose queue is gone for good
   * instead of failing the process. @defaultValue false
   */
  follow?: boolean;
  /** With `follow`: how often the whole set is read again. @defaultValue DEFAULT_RESYNC_MS */
  resyncMs?: number;
}

export interface PooledRosterOptions extends TenantRosterOptions {
  pooled: PooledGroupOptions;
  ledger: LossLedger;
  onQueueFull: QueueFullObserver;
  /** The connection the runners are attached to now; undefined before the group's first attach, or while disconnected. */
  connection(): AmqpConnection | undefined;
  /** @defaultValue declareTopology (a unit test passes a stub) */
  declare?: typeof declareTopology;
}

/** How much later a pooled runner looks for unannounced suspects per tenant of its process. */
const SUSPECT_CHECK_MS_PER_TENANT = 15;
/** Tenants attached at once (each is a few round trips on shared channels). */
const ATTACH_LANES = 16;
/** Channels every tenant's topology is declared on, at each attach. */
const DECLARE_LANES = 16;

/**
 * The tenants of a pooled process (`run --tenants` / `--all-tenants`): one stage (and variant)
 * for many tenants, their runners sharing the channels and `concurrency` slots of a
 * {@link TenantPool}. Tenants are added and removed while it runs: by `addTenant` /
 * `removeTenant`, by a `terminate --tenant T`, and with `follow` by a {@link TenantMembership}
 * that follows the tenants provisioned and retired on the broker.
 *
 * Everything that is different about a pooled process lives here: the pool's resources given to
 * each runner, one attach for all tenants, a runner that cannot recover released instead of
 * failing the process (`follow`), a tenant terminated alone.
 */
export class PooledRoster extends TenantRoster {
  /** The channels and slots its runners share. */
  readonly pool: TenantPool;
  private readonly membership: TenantMembership | undefined;
  /** The configured tenants, as a set (suspectOnFirstUse asks for every tenant). */
  private configured: Set<string> | undefined;

  constructor(protected override readonly options: PooledRosterOptions) {
    super(options);
    const { config, log, pooled } = options;
    const settings = config.stages.get(pooled.stage.metadata.name);
    if (settings === undefined) throw new Error(`stage "${pooled.stage.metadata.name}" is not configured`);
    this.pool = new TenantPool({
      config,
      settings,
      log,
      ledger: options.ledger,
      onFatal: (err) => options.onFatal(err),
      onQueueFull: options.onQueueFull,
      redeclare: pooled.follow !== true,
      ...(pooled.threads === undefined ? {} : { threads: pooled.threads }),
    });
    // Following the broker, every configured tenant may join: their minimums must fit together.
    if (pooled.follow === true) checkMinimums(config, settings, config.tenants);
    if (pooled.follow === true) {
      this.membership = new TenantMembership(this, {
        config,
        log,
        ...(pooled.resyncMs === undefined ? {} : { resyncMs: pooled.resyncMs }),
      });
    }
  }

  /**
   * Counts a tenant in, refusing one whose `min_concurrency` would not fit beside those of the
   * tenants served already (a ConfigError naming `stages.<name>.concurrency`).
   */
  override admit(instance: StageInstance): StageRunner {
    const { config } = this.options;
    // The minimums served already fit: only a tenant with one of its own can break the sum. Checked
    // for every tenant, each admit would scan all those served: 10^8 steps for 10,000 tenants.
    if (instance.tenant !== undefined && tenantShare(config, instance.tenant).minConcurrency > 0) {
      checkMinimums(config, this.pool.settings, [...this.tenants, instance.tenant]);
    }
    return super.admit(instance);
  }

  /** Following the broker: the tenants configured or provisioned now join those given; then every stage is built. */
  override async prepare(): Promise<void> {
    if (this.membership !== undefined) {
      // One set of those served, not a scan of every runner per tenant: 10,000 tenants would make 10^8 steps.
      const served = new Set(this.tenants);
      for (const tenant of await this.membership.current()) {
        if (served.has(tenant)) continue;
        served.add(tenant);
        this.admit(this.instanceOf(tenant));
      }
    }
    await super.prepare();
  }

  /**
   * The shared channels first, then every tenant's topology in one declaration on several
   * channels and every queue state from one listing, then the runners, several at once. One
   * tenant at a time, each declaring on channels of its own and probing its markers, took
   * minutes for a thousand tenants.
   */
  override async attach(connection: AmqpConnection): Promise<void> {
    const { config, log } = this.options;
    const declare = this.options.declare ?? declareTopology;
    await this.pool.attach(connection);
    const runners = [...this.runners];
    // With broker-enforced tenants a stage user cannot declare: each runner checks its own.
    const declared = !config.security.tenantUsers;
    if (declared) {
      await declare(connection, this.attachTopology(runners), log, { lanes: DECLARE_LANES, ...this.pool.drainMarkers(connection) });
    }
    const states = await this.pool.statesOf(runners.map((runner) => runner.target));
    await inParallel(
      runners.map((runner, i) => ({ runner, state: states[i] })),
      ATTACH_LANES,
      ({ runner, state }) => runner.attach(connection, { declared, ...(state === undefined ? {} : { state }) }),
    );
    log.info('tenants consuming', { tenants: runners.length, channels: this.pool.channels });
  }

  /**
   * What an attach declares: every tenant's topology; following the broker, of a tenant found
   * there rather than configured, nothing beside the core. `provision` made its queues, and
   * declaring them again was most of a start (16 declarations of 20 per tenant of the example
   * pipeline, 160,000 round trips for 10,000 tenants); a queue of it gone missing is what a
   * runner following the broker already handles (released, taken again once provisioned again:
   * TenantMembership). What `provision` leaves to the stages, the `suspect` companions, is
   * declared on first use ({@link suspectOnFirstUse}): 20,000 declarations at 10,000 tenants
   * were most of the rest. A configured tenant may have no `provision` behind it: all of its
   * topology is declared, as without `follow`.
   */
  private attachTopology(runners: readonly StageRunner[]): Topology {
    const { config, pooled } = this.options;
    if (pooled.follow !== true) return mergeTopologies(...runners.map((runner) => runner.topology));
    const parts = runners.filter((runner) => !this.suspectOnFirstUse(runner.tenant)).map((runner) => runner.topology);
    return mergeTopologies(coreTopology(config), ...parts);
  }

  /**
   * Whether a tenant's runner declares its `suspect` part on first use (SuspectDeclaration)
   * rather than at attach: following the broker, a tenant found provisioned there, not
   * configured; never with `security.tenantUsers`, where `provision` declared the suspects.
   */
  private suspectOnFirstUse(tenant: string | undefined): boolean {
    const { config, pooled } = this.options;
    if (pooled.follow !== true || tenant === undefined || config.security.tenantUsers) return false;
    this.configured ??= new Set(config.tenants);
    return !this.configured.has(tenant);
  }

  override follow(connection: AmqpConnection): Promise<void> {
    return this.membership?.attach(connection) ?? Promise.resolve();
  }

  override detach(): void {
    super.detach();
    this.pool.detach();
  }

  /**
   * Starts serving `tenant` (a tenant provisioned while the process runs). Its runner declares
   * its topology and starts consuming on the current connection, or at the next one.
   * @returns false when it is served already, or the group is stopping.
   */
  override async addTenant(tenant: string): Promise<boolean> {
    const { config, log } = this.options;
    if (this.frozen || this.runners.some((runner) => runner.tenant === tenant)) return false;
    const runner = this.admit(this.instanceOf(tenant));
    await runner.prepare();
    const connection = this.options.connection();
    if (connection !== undefined && isOpen(connection)) {
      try {
        // Declared here even when following the broker (the exchange it was found by may be a
        // stage's of another queue, not `provision`'s), but for a suspect part declared on first use.
        const topology = this.suspectOnFirstUse(tenant) ? withoutSuspectPart(config, runner.topology) : runner.topology;
        if (!config.security.tenantUsers) await (this.options.declare ?? declareTopology)(connection, topology, log);
        await runner.attach(connection, { declared: !config.security.tenantUsers });
      } catch (err) {
        if (isOpen(connection)) {
          log.error('tenant not attached', { tenant, err: (err as Error).message });
          await this.removeTenant(tenant);
          return false;
        }
        // The connection went: the next one attaches every runner.
      }
    }
    log.info('tenant added', { tenant, tenants: this.runners.length });
    return true;
  }

  /**
   * `terminate --tenant T` (before `tenant retire T`): that tenant is released and the others go
   * on; following the broker, it is not taken back until provisioned again.
   */
  override async terminate(matching: readonly StageRunner[], tenant: string | undefined): Promise<boolean> {
    if (tenant === undefined) return super.terminate(matching, tenant);
    this.membership?.exclude(tenant);
    await Promise.all(matching.map((r) => (r.tenant === undefined ? undefined : this.removeTenant(r.tenant))));
    return false;
  }

  /** No tenant is added from now on, and the changes already learnt are over. */
  override async freeze(): Promise<void> {
    await super.freeze();
    await this.membership?.close();
  }

  override async close(): Promise<void> {
    await this.pool.close();
  }

  protected override runnerOptions(instance: StageInstance): StageRunnerOptions {
    const options = super.runnerOptions(instance);
    if (instance.tenant === undefined) return options;
    return {
      ...options,
      pooled: {
        ...this.pool.resourcesFor(instance.tenant),
        ...(this.suspectOnFirstUse(instance.tenant) ? { suspectOnFirstUse: true } : {}),
      },
      // Looking for suspects nobody announced is one passive declare per tenant: spread
      // thinner with more tenants, as many as the process serves at each look (1,000 tenants:
      // every 15 s), so that the process makes at most about 67 checks a second however many it serves.
      suspectCheckMs: () => Math.max(DEFAULT_SUSPECT_CHECK_MS, this.runners.length * SUSPECT_CHECK_MS_PER_TENANT),
    };
  }

  protected override async release(runner: StageRunner): Promise<void> {
    if (runner.tenant !== undefined && runner.pooledResources !== undefined) await this.pool.release(runner.tenant, runner.pooledResources);
  }

  protected override onRunnerFatal(runner: StageRunner, err: Error): void {
    const tenant = runner.tenant;
    if (this.membership === undefined || tenant === undefined) {
      super.onRunnerFatal(runner, err);
      return;
    }
    // Its queue went away and did not come back (a tenant retired under it): the others go on.
    this.options.log.error('tenant released: its queue cannot be consumed', { tenant, err: err.message });
    this.removeTenant(tenant).catch((removal: unknown) =>
      this.options.log.error('tenant not released', { tenant, err: (removal as Error).message }),
    );
  }

  private instanceOf(tenant: string): StageInstance {
    const { stage, variant } = this.options.pooled;
    return { stage, tenant, ...(variant === undefined ? {} : { variant }) };
  }
}
