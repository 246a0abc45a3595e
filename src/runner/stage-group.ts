import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ConnectionManager } from '../broker/connection-manager.js';
import { whenClosed } from '../broker/connection-state.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { middlewareLists } from '../stage/middleware/middleware-lists.js';
import type { QueueDepthCache } from '../observability/queue-depth-cache.js';
import type { StageMetrics } from '../observability/stage-metrics.js';
import { provisionTopology } from '../topology/build-topology.js';
import { settleWithin } from '../util/settle-within.js';
import type { Topology } from '../topology/topology.types.js';
import type { DirectiveGate } from './handling/directive-gate.js';
import { ControlRouter } from './process/control-router.js';
import { limitsControl } from './process/limits-control.js';
import { GroupConnection, reattachTimeoutMs } from './process/group-connection.js';
import { groupDepths } from './process/group-depths.js';
import { GroupLifecycle, type GroupState } from './process/group-lifecycle.js';
import { readinessOf, type Readiness } from './process/group-readiness.js';
import { checkKnownTenants } from './process/known-tenants.js';
import { PooledRoster } from './process/pooled-roster.js';
import { ProcessServices } from './process/process-services.js';
import type { StageGroupOptions, StageProvisioning } from './process/stage-group-options.js';
import type { StageInstance } from './process/stage-instance.js';
import type { TenantPool } from './process/tenant-pool.js';
import { TenantRoster } from './process/tenant-roster.js';
import type { StageRunner } from './stage-runner.js';

export { devInstances, type StageInstance } from './process/stage-instance.js';
export type { PooledGroupOptions } from './process/pooled-roster.js';
export type { Readiness } from './process/group-readiness.js';
export type { GroupState } from './process/group-lifecycle.js';
export type { StageGroupOptions, StageProvisioning } from './process/stage-group-options.js';

/**
 * Channels the provisioned topology is declared on at each attach: `dev` of a thousand tenants
 * declares thousands of queues, one round trip each.
 */
const PROVISION_DECLARE_LANES = 16;

/**
 * Stage runners sharing one connection: `run` has one, `dev` many; a pooled `run` one stage for
 * many tenants. A composition of:
 * - the {@link ProcessServices}: what there is one of per process (isolation gate, loss ledger,
 *   directives, payloads, events, metrics...), built and closed in one place;
 * - the {@link GroupConnection}: connecting, and re-attaching everything on each new connection;
 * - the {@link TenantRoster} (a {@link PooledRoster} when pooled): the runners and who they serve;
 * - the {@link ControlRouter}: control messages to the runners they address;
 * - a {@link GroupLifecycle}: `starting`, `running`, `stopping`, `stopped`, and one stop promise.
 *
 * Lifecycle: `start()` connects (retrying with backoff while the broker is unreachable),
 * optionally provisions, starts every runner and listens on the control exchange. When the
 * connection drops, the group reconnects, re-declares and re-attaches every runner: consuming
 * resumes by itself. `stop()` drains the runners within the grace period, then closes the
 * connection (channels first, so no acknowledgement is lost). `terminated` resolves when a
 * `terminate` control message stopped every runner; `failed` when a runner cannot recover (its
 * channel keeps failing on a live connection): `run` then exits 1 for the orchestrator to restart.
 */
export class StageGroup {
  /** Pooled: the channels and slots its runners share. */
  readonly pool: TenantPool | undefined;
  readonly failed: Promise<Error>;
  readonly terminated: Promise<void>;
  /** Prometheus metrics of every instance in the group, and of its connection. */
  readonly metrics: StageMetrics;
  /**
   * One per process: batch and tenant directives (cancel, pause) its runners obey. Public so that
   * a caller can ask what the process would do with a job now (tests wait on it after a directive).
   */
  readonly directives: DirectiveGate;
  private readonly lifecycle = new GroupLifecycle();
  private readonly services: ProcessServices;
  private readonly connection: GroupConnection;
  private readonly roster: TenantRoster;
  private readonly control: ControlRouter;
  private readonly depths: QueueDepthCache;
  private readonly knownTenantsOnly: boolean;
  /** What `start(provision)` declares on every connection; nothing without `provision`. */
  private topology: Topology | undefined;
  private fail!: (err: Error) => void;
  private terminate!: () => void;

  constructor(
    private readonly config: CompiledConfig,
    private readonly instances: readonly StageInstance[],
    private readonly log: Logger,
    options: StageGroupOptions = {},
  ) {
    this.knownTenantsOnly = options.knownTenantsOnly ?? false;
    this.failed = new Promise<Error>((resolve) => (this.fail = resolve));
    this.terminated = new Promise<void>((resolve) => (this.terminate = resolve));
    const names = [...new Set(instances.map((i) => i.stage.metadata.name))].join(',');
    const manager = new ConnectionManager(config, log, `stagecoach ${names}`);
    const services = new ProcessServices({
      config,
      log,
      names,
      connection: () => manager.connection,
      ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
      ...(options.payloads === undefined ? {} : { payloads: options.payloads }),
      // Copied: a chain never changes while jobs run through it (tenants added later included).
      ...(options.middleware === undefined ? {} : { middleware: middlewareLists('StageGroup', options.middleware) }),
    });
    this.services = services;
    this.metrics = services.metrics;
    this.directives = services.directives;
    const rosterOptions = {
      config,
      log,
      runnerOptions: (i: StageInstance) => services.runnerOptions(i),
      onFatal: (err: Error) => this.fail(err),
    };
    if (options.pooled === undefined) {
      this.roster = new TenantRoster(rosterOptions);
      this.pool = undefined;
    } else {
      const pooled = new PooledRoster({
        ...rosterOptions,
        pooled: options.pooled,
        ledger: services.ledger,
        onQueueFull: services.queueFull.observe,
        // An added tenant attaches at once only once the group attached (else with everyone else).
        connection: () => (this.connection.attached ? this.connection.current : undefined),
      });
      this.roster = pooled;
      this.pool = pooled.pool;
    }
    for (const instance of instances) this.roster.admit(instance);
    this.connection = new GroupConnection(manager, {
      log,
      metrics: this.metrics,
      // Ended by its connection's close too: an attach stuck there (dropped past its bound) must
      // not keep the isolation gate shut (no suspect would run again in this process).
      attach: (connection, step) =>
        this.services.gate.whileAttaching(() => Promise.race([this.attachAll(connection, step), whenClosed(connection)])),
      onLost: () => {
        services.detach();
        this.roster.detach();
      },
      onFatal: (err) => this.fail(err),
      stallMs: config.broker.stallTimeout * 1000,
      // Read at each attach: a pooled process's runners come and go.
      reattachTimeoutMs: () => reattachTimeoutMs(this.roster.runners.length),
    });
    this.control = new ControlRouter({
      config,
      log,
      targets: this.roster,
      directives: this.directives,
      connection: () => this.connection.current,
      onTerminated: () => this.terminate(),
      onLimits: limitsControl(services.flow, config, log),
      onExcuse: (ids) => services.ledger.excuse(ids),
      onTimedOut: (ids, timeoutMs) => services.ledger.recordTimedOut(ids, timeoutMs),
    });
    const connection = (): AmqpConnection | undefined => this.connection.current;
    // Only tenants with series of their own: `_other` is not worth a passive declare per queue of 10,000 tenants every 15 s.
    this.depths = groupDepths(services.limits, connection, () =>
      this.roster.queues.filter((queue) => services.metrics.labelsOwn(queue.tenant)),
    );
  }

  /** Every runner of the process (a pooled one: one per tenant served). */
  get runners(): StageRunner[] {
    return this.roster.runners;
  }

  /** Tenants a pooled group serves now. */
  get tenants(): string[] {
    return this.roster.tenants;
  }

  /** `gracePeriod` (seconds): what `stop()` takes at most. */
  get gracePeriod(): number {
    return this.config.gracePeriod;
  }

  get state(): GroupState {
    return this.lifecycle.state;
  }

  /** `host:port` of the broker node the group is connected to (one of `broker.urls`); undefined while disconnected. */
  get node(): string | undefined {
    return this.connection.node;
  }

  /** Connections made; above 1 means the group reconnected. */
  get connections(): number {
    return this.connection.connections;
  }

  /**
   * Pooled: starts serving `tenant` (a tenant provisioned while the process runs). Its runner
   * declares its topology and starts consuming on the current connection, or at the next one.
   * @returns false when it is served already, or the group is stopping.
   */
  addTenant(tenant: string): Promise<boolean> {
    return this.roster.addTenant(tenant);
  }

  /**
   * Stops serving `tenant` (retired): its runner drains within the grace period and leaves.
   * @returns false when it was not served.
   */
  removeTenant(tenant: string): Promise<boolean> {
    return this.roster.removeTenant(tenant);
  }

  /**
   * @param provision declare every queue of every configured tenant on every connection (what
   * `dev` does); with a {@link StageProvisioning}, also what it provisions once before attaching.
   */
  async start(provision: boolean | StageProvisioning = false): Promise<void> {
    if (provision !== false) {
      const stages = (typeof provision === 'object' ? provision.stages : undefined) ?? this.instances.map((i) => i.stage.metadata);
      this.topology = provisionTopology(this.config, stages);
    }
    this.metrics.setQueueDepthSource(() => this.depths.read(), this);
    this.metrics.setRunnerSource(
      () =>
        this.runners.map((runner) => ({
          stage: runner.stageName,
          queue: runner.inputQueue,
          tenant: runner.tenant ?? '',
          consuming: runner.healthy,
          inFlight: runner.inFlight,
        })),
      this,
    );
    await this.roster.prepare();
    let connection = await this.connection.start();
    if (this.knownTenantsOnly) {
      const tenants = this.instances.map((i) => i.tenant);
      connection = await checkKnownTenants(this.config, tenants, connection, (lost) => this.connection.next(lost), this.log);
    }
    if (typeof provision === 'object') await provision.beforeAttach(this.services.events.sink);
    this.lifecycle.run();
    await this.connection.attachFirst(connection);
    this.depths.start();
  }

  /** Takes the flow limits (`queues.*.concurrency`, `rate_limit`, `limits`) of `config` from now on. */
  updateLimits(config: CompiledConfig): void {
    this.services.flow.update(config);
  }

  /** Ready when connected, heard from (StallWatch), and every runner consumes or is meant not to; see {@link readinessOf}. */
  readiness(): Readiness {
    const { connected, attached, blocked, silentMs } = this.connection;
    return readinessOf(connected, attached, this.runners, blocked, silentMs, !this.services.flow.tokensOpen);
  }

  /**
   * Drains every runner, then closes the connection, all within `graceMs`: every step waits on
   * the broker, and one that stopped reading (an alarm) answers none, so at `graceMs` the socket
   * is cut (unfinished jobs go back to their queues once it reads again). A second call (SIGTERM
   * after a `terminate`) waits for the first and gets its result.
   * @returns false when the grace period ran out (for some runner, or for the closing).
   */
  stop(graceMs = this.config.gracePeriod * 1000): Promise<boolean> {
    this.connection.halt(new Error('stage group stopped while starting'));
    return this.lifecycle.stop(async () => {
      const inTime = await settleWithin(this.shutdown(graceMs, Date.now()), graceMs);
      if (inTime !== undefined) return inTime;
      this.log.warn('stopping took the whole grace period; cutting the broker connection', { grace_ms: graceMs });
      this.connection.cut();
      return false;
    });
  }

  /** The steps of `stop()`, the connection's close bounded by what is left of the grace period. */
  private async shutdown(graceMs: number, began: number): Promise<boolean> {
    this.depths.stop();
    await this.roster.freeze();
    await this.control.close();
    // A runner already stopping (terminate) hands back its own stop promise: waited for too.
    const drained = await Promise.all(this.runners.map((runner) => runner.stop(graceMs)));
    await this.roster.close();
    await this.services.close();
    await this.connection.close(Math.max(0, graceMs - (Date.now() - began)));
    return drained.every(Boolean);
  }

  /** Everything of the process on `connection`: at start, and again after every reconnection. `step`: see GroupConnectionOptions.attach. */
  private async attachAll(connection: AmqpConnection, step: (where: string) => void): Promise<void> {
    step('process services (flow control, directives)');
    await this.services.attach(connection);
    step('provisioned topology');
    if (this.topology !== undefined) await declareTopology(connection, this.topology, this.log, { lanes: PROVISION_DECLARE_LANES });
    step('runners');
    await this.roster.attach(connection);
    step('control listener');
    await this.control.attach(connection);
    step("following the broker's tenants");
    await this.roster.follow(connection);
  }
}
