import { ConnectionManager } from '../broker/connection-manager.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { isOpen } from '../broker/connection-state.js';
import { exchangeExists } from '../broker/exchange-exists.js';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { TenantError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import { mergeTopologies, provisionTopology } from '../topology/build-topology.js';
import { inParallel } from '../util/in-parallel.js';
import { syncQueueSettings } from '../plan/queue-settings.js';
import { ManagementApi } from '../security/management-api.js';
import { BrokerNames } from '../topology/names.js';
import { StageMetrics, type QueueDepthSample } from '../observability/stage-metrics.js';
import { QueueLimits } from '../observability/queue-limits.js';
import { EventPublisher } from '../events/event-publisher.js';
import { QueueFullReporter } from '../events/queue-full-reporter.js';
import { ControlListener } from '../control/control-listener.js';
import { DirectiveGate } from './directive-gate.js';
import { payloadOffloaderFor, type PayloadOffloader } from '../payload/payload-offloader.js';
import type { ControlMessage } from '../control/control-protocol.js';
import type { LoadedStage } from '../stage/stage-loader.js';
import { EventLoopWatch } from './event-loop-watch.js';
import { IsolationGate } from './isolation-gate.js';
import { LossLedger } from './loss-ledger.js';
import { StageRunner, stallWindowMs } from './stage-runner.js';
import { TenantPool } from './tenant-pool.js';
import { QueueProbe } from './shared-channel.js';
import { DEFAULT_SUSPECT_CHECK_MS } from './suspect-watch.js';
import { TenantMembership } from './tenant-membership.js';
import type { PooledThreadedHandler } from '../stage/threads/threaded-handler.js';

export interface StageInstance {
  stage: LoadedStage;
  tenant?: string;
  variant?: string;
}

/**
 * Every instance `dev` runs: a shared stage once; a tenant-scoped one per tenant, plus one per
 * variant queue of its input.
 */
export function devInstances(config: CompiledConfig, stages: readonly LoadedStage[]): StageInstance[] {
  const instances: StageInstance[] = [];
  for (const stage of stages) {
    const input = queueFor(config, stage.metadata.input);
    if (input.scope === 'shared') {
      instances.push({ stage });
      continue;
    }
    for (const tenant of config.tenants) {
      instances.push({ stage, tenant });
      for (const variant of Object.keys(input.variants?.values ?? {})) instances.push({ stage, tenant, variant });
    }
  }
  return instances;
}

export interface StageGroupOptions {
  /** Shared with other groups or a health server; a new registry by default. */
  metrics?: StageMetrics;
  /**
   * Refuse to start for a tenant that is neither in the configuration's `tenants` nor provisioned
   * on the broker (its tenant exchange exists): `start()` fails with a {@link TenantError} before
   * anything is declared, instead of a stage creating that tenant's queues and waiting on them for
   * ever. `stagecoach run` sets it. @defaultValue false
   */
  knownTenantsOnly?: boolean;
  /**
   * One process serving one stage for many tenants (`run --tenants` / `--all-tenants`): every
   * instance is the same stage (and variant), and the runners share channels and the stage's
   * `concurrency` slots by weight (TenantPool). Tenants can be added and removed while it runs.
   */
  pooled?: PooledGroupOptions;
  /**
   * Payload offloading to share; by default the configured store, which `stop()` closes. `false`
   * turns it off: jobs go inline whatever their size, and a job sent by reference fails (benches).
   */
  payloads?: PayloadOffloader | false;
}

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

/** How much later a pooled runner looks for unannounced suspects per tenant of its process. */
const SUSPECT_CHECK_MS_PER_TENANT = 15;

/** Tenants attached at once by a pooled group (each is a few round trips on shared channels). */
const ATTACH_LANES = 16;
/** Channels a pooled group declares its tenants' topology on, at start. */
const DECLARE_LANES = 16;

export interface Readiness {
  ready: boolean;
  reason?: string;
}

/**
 * Stage runners sharing one connection: `run` has one, `dev` many.
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
  readonly runners: StageRunner[] = [];
  /** Pooled: the channels and slots its runners share. */
  readonly pool: TenantPool | undefined;
  private readonly membership: TenantMembership | undefined;
  private readonly queueFull: QueueFullReporter;
  readonly failed: Promise<Error>;
  readonly terminated: Promise<void>;
  private readonly manager: ConnectionManager;
  private readonly control: ControlListener;
  private fail!: (err: Error) => void;
  private terminate!: () => void;
  private stopped: Promise<boolean> | undefined;
  private started = false;
  private provision = false;
  private readonly knownTenantsOnly: boolean;
  /** Set while `start()` waits for a connection to check tenants on: `stop()` ends the wait. */
  private stopWaiting: ((err: Error) => void) | undefined;
  /** One per process: a suspect of any runner runs with nothing else of the process in hand. */
  private readonly gate = new IsolationGate();
  /** One per process: what it lost with a channel while healthy is not a crash when it returns. */
  private readonly watch = new EventLoopWatch();
  private readonly ledger: LossLedger;
  /**
   * One per process: batch and tenant directives (cancel, pause) its runners obey. Public so that
   * a caller can ask what the process would do with a job now (tests wait on it after a directive).
   */
  readonly directives: DirectiveGate;
  /** One per process: payload offloading and its store (docs/payloads.md), closed with the group. */
  private readonly payloads: PayloadOffloader | undefined;
  private readonly ownsPayloads: boolean;

  /** Prometheus metrics of every instance in the group, and of its connection. */
  readonly metrics: StageMetrics;
  /** OJS events of the group (`queue.full`, and `queue.config_updated` when `dev` provisions), on its connection. */
  private readonly events: EventPublisher;
  private readonly limits: QueueLimits;

  constructor(
    private readonly config: CompiledConfig,
    private readonly instances: readonly StageInstance[],
    private readonly log: Logger,
    options: StageGroupOptions = {},
  ) {
    this.metrics = options.metrics ?? new StageMetrics({ log });
    this.knownTenantsOnly = options.knownTenantsOnly ?? false;
    this.failed = new Promise<Error>((resolve) => (this.fail = resolve));
    this.terminated = new Promise<void>((resolve) => (this.terminate = resolve));
    const names = [...new Set(instances.map((i) => i.stage.metadata.name))].join(',');
    this.manager = new ConnectionManager(config, log, `stagecoach ${names}`);
    this.control = new ControlListener(
      config,
      log,
      (message) => this.onControl(message),
      () => {
        // Directive messages may have been missed too: markers are read again when next needed.
        this.directives.forgetAll();
        return this.syncStates(this.runners);
      },
    );
    this.ledger = new LossLedger(this.watch, stallWindowMs(config));
    this.directives = new DirectiveGate(config.prefix, log);
    this.payloads = options.payloads === false ? undefined : (options.payloads ?? payloadOffloaderFor(config, log));
    this.ownsPayloads = options.payloads === undefined;
    this.events = new EventPublisher(config, { source: `stagecoach/${names}`, log, connection: () => this.manager.connection });
    this.limits = new QueueLimits(config, log);
    this.queueFull = new QueueFullReporter(config, this.events, {
      onRefused: (refused) => this.metrics.queueOverflow({ ...refused, policy: 'reject' }),
    });
    this.pooled = options.pooled;
    if (options.pooled !== undefined) {
      const settings = config.stages.get(options.pooled.stage.metadata.name);
      if (settings === undefined) throw new Error(`stage "${options.pooled.stage.metadata.name}" is not configured`);
      this.pool = new TenantPool({
        config,
        settings,
        log,
        ledger: this.ledger,
        onFatal: (err) => this.fail(err),
        onQueueFull: this.queueFull.observe,
        redeclare: options.pooled.follow !== true,
        ...(options.pooled.threads === undefined ? {} : { threads: options.pooled.threads }),
      });
    }
    for (const instance of instances) this.runners.push(this.createRunner(instance));
    if (options.pooled?.follow === true) {
      this.membership = new TenantMembership(this, {
        config,
        log,
        ...(options.pooled.resyncMs === undefined ? {} : { resyncMs: options.pooled.resyncMs }),
      });
    }
  }

  private readonly pooled: PooledGroupOptions | undefined;

  private createRunner(instance: StageInstance): StageRunner {
    const pooled = this.pool !== undefined && instance.tenant !== undefined ? this.pool.resourcesFor(instance.tenant) : undefined;
    const runner = new StageRunner({
      config: this.config,
      stage: instance.stage,
      log: this.log.child({ stage: instance.stage.metadata.name, tenant: instance.tenant, variant: instance.variant }),
      metrics: this.metrics.instance({
        stage: instance.stage.metadata.name,
        queue: instance.stage.metadata.input,
        tenant: instance.tenant ?? '',
        outputs: instance.stage.metadata.outputs,
      }),
      ...(instance.tenant === undefined ? {} : { tenant: instance.tenant }),
      ...(instance.variant === undefined ? {} : { variant: instance.variant }),
      gate: this.gate,
      ledger: this.ledger,
      directives: this.directives,
      ...(this.payloads === undefined ? {} : { payloads: this.payloads }),
      onQueueFull: this.queueFull.observe,
      ...(pooled === undefined
        ? {}
        : {
            pooled,
            // Looking for suspects nobody announced is one passive declare per tenant: spread
            // thinner with more tenants (1,000 tenants: every 15 s, 67 checks a second).
            suspectCheckMs: Math.max(DEFAULT_SUSPECT_CHECK_MS, (this.runners.length + 1) * SUSPECT_CHECK_MS_PER_TENANT),
          }),
    });
    runner.on('fatal', (err: Error) => {
      if (this.pooled?.follow === true && runner.tenant !== undefined) {
        // Its queue went away and did not come back (a tenant retired under it): the others go on.
        this.log.error('tenant released: its queue cannot be consumed', { tenant: runner.tenant, err: err.message });
        const tenant = runner.tenant;
        this.removeTenant(tenant).catch((removal: unknown) =>
          this.log.error('tenant not released', { tenant, err: (removal as Error).message }),
        );
        return;
      }
      this.fail(err);
    });
    return runner;
  }

  /** Tenants a pooled group serves now. */
  get tenants(): string[] {
    return this.runners.map((runner) => runner.tenant).filter((tenant): tenant is string => tenant !== undefined);
  }

  /**
   * Pooled: starts serving `tenant` (a tenant provisioned while the process runs). Its runner
   * declares its topology and starts consuming on the current connection, or at the next one.
   * @returns false when it is served already, or the group is stopping.
   */
  async addTenant(tenant: string): Promise<boolean> {
    const pooled = this.pooled;
    if (pooled === undefined) throw new Error('addTenant: not a pooled group');
    if (this.stopped !== undefined || this.runners.some((runner) => runner.tenant === tenant)) return false;
    const runner = this.createRunner({ stage: pooled.stage, tenant, ...(pooled.variant === undefined ? {} : { variant: pooled.variant }) });
    this.runners.push(runner);
    await runner.prepare();
    const connection = this.manager.connection;
    if (this.started && connection !== undefined && isOpen(connection)) {
      try {
        // Declared here even when following the broker: `provision` may leave the companions
        // (`due`, `suspect`) to the stages.
        if (!this.config.security.tenantUsers) await declareTopology(connection, runner.topology, this.log);
        await runner.attach(connection, { declared: !this.config.security.tenantUsers });
      } catch (err) {
        if (isOpen(connection)) {
          this.log.error('tenant not attached', { tenant, err: (err as Error).message });
          await this.removeTenant(tenant);
          return false;
        }
        // The connection went: the next one attaches every runner.
      }
    }
    this.log.info('tenant added', { tenant, tenants: this.runners.length });
    return true;
  }

  /**
   * Pooled: stops serving `tenant` (retired): its runner drains within the grace period and
   * leaves. @returns false when it was not served.
   */
  async removeTenant(tenant: string): Promise<boolean> {
    const runner = this.runners.find((r) => r.tenant === tenant);
    if (runner === undefined) return false;
    this.runners.splice(this.runners.indexOf(runner), 1);
    await runner.stop(this.config.gracePeriod * 1000);
    if (runner.pooledResources !== undefined) await this.pool?.release(tenant, runner.pooledResources);
    // Its counters stay until the process restarts, as a Prometheus counter should.
    this.log.info('tenant removed', { tenant, tenants: this.runners.length });
    return true;
  }

  /** Connections made; above 1 means the group reconnected. */
  get connections(): number {
    return this.manager.connections;
  }

  /** @param provision declare every queue of every configured tenant first (what `dev` does). */
  async start(provision = false): Promise<void> {
    this.provision = provision;
    this.manager.on('connected', (connection: AmqpConnection) => {
      this.metrics.setConnected(true);
      if (!this.started) return;
      this.metrics.reconnected();
      void this.reattach(connection);
    });
    this.manager.on('disconnected', () => {
      this.metrics.setConnected(false);
      for (const runner of this.runners) runner.detach();
      this.pool?.detach();
    });
    this.metrics.setQueueDepthSource(() => this.queueDepths());
    this.metrics.setRunnerSource(() =>
      this.runners.map((runner) => ({
        stage: runner.stageName,
        queue: runner.inputQueue,
        tenant: runner.tenant ?? '',
        consuming: runner.healthy,
        inFlight: runner.inFlight,
      })),
    );
    if (this.membership !== undefined && this.pooled !== undefined) {
      const { stage, variant } = this.pooled;
      for (const tenant of await this.membership.current()) {
        if (!this.tenants.includes(tenant))
          this.runners.push(this.createRunner({ stage, tenant, ...(variant === undefined ? {} : { variant }) }));
      }
    }
    // Stages are built before the broker is reached: a module that does not load fails now.
    for (const runner of this.runners) await runner.prepare();
    let connection = await this.manager.start();
    if (this.knownTenantsOnly) connection = await this.checkTenants(connection);
    if (provision) await this.provisionSettings();
    // From here on every new connection re-attaches everything, this first one included if it
    // drops while attaching (a broker restarting just as the stage starts).
    this.started = true;
    try {
      await this.attachAll(connection);
    } catch (err) {
      if (isOpen(connection)) throw err;
      this.log.warn('connection lost while starting; attaching on the next connection', { err: (err as Error).message });
    }
  }

  /** `host:port` of the broker node the group is connected to (one of `broker.urls`); undefined while disconnected. */
  get node(): string | undefined {
    return this.manager.node;
  }

  /** Ready when connected and every runner consumes, or is meant not to (paused, quiet). */
  readiness(): Readiness {
    if (!this.manager.connected) return { ready: false, reason: 'not connected to the broker' };
    if (!this.started) return { ready: false, reason: 'starting' };
    const down = this.runners.filter((r) => !r.healthy);
    if (down.length > 0) {
      // A thousand tenants' names would make the answer unreadable: a count and the first few.
      const named = down.slice(0, READINESS_NAMES).map((r) => r.name);
      const more = down.length > READINESS_NAMES ? ` and ${down.length - READINESS_NAMES} more` : '';
      return { ready: false, reason: `not consuming (${down.length} of ${this.runners.length}): ${named.join(', ')}${more}` };
    }
    return { ready: true };
  }

  /**
   * Drains every runner within the grace period, then closes the connection. A second call
   * (SIGTERM after a `terminate`) waits for the first and gets its result.
   * @returns false when the grace period ran out for some runner.
   */
  stop(graceMs = this.config.gracePeriod * 1000): Promise<boolean> {
    this.stopWaiting?.(new Error('stage group stopped while starting'));
    this.stopped ??= (async () => {
      await this.membership?.close();
      await this.control.close();
      // A runner already stopping (terminate) hands back its own stop promise: waited for too.
      const drained = await Promise.all(this.runners.map((runner) => runner.stop(graceMs)));
      await this.pool?.close();
      await this.directives.close();
      if (this.ownsPayloads) await this.payloads?.store.close();
      await this.events.close();
      await this.manager.close();
      this.watch.close();
      return drained.every(Boolean);
    })();
    return this.stopped;
  }

  /**
   * Before anything is declared: every tenant of the group is configured or provisioned (its
   * tenant exchange exists; `provision` and every stage of the tenant declare it). Checked once,
   * at start, and again on the next connection if this one drops mid-check.
   * @returns the connection the check succeeded on.
   * @throws TenantError naming the first unknown tenant and how to provision it.
   */
  private async checkTenants(first: AmqpConnection): Promise<AmqpConnection> {
    const configured = new Set(this.config.tenants);
    const unknown = [...new Set(this.instances.map((i) => i.tenant))].filter(
      (tenant): tenant is string => tenant !== undefined && !configured.has(tenant),
    );
    if (unknown.length === 0) return first;
    const names = new BrokerNames(this.config.prefix);
    let connection = first;
    for (;;) {
      try {
        for (const tenant of unknown) {
          if (!(await exchangeExists(connection, names.tenantExchange(tenant)))) {
            throw new TenantError(
              tenant,
              `tenant "${tenant}" is neither configured (tenants in ${this.config.source}) nor provisioned on the broker: ` +
                `run \`stagecoach provision --tenant ${tenant}\` first`,
            );
          }
        }
        return connection;
      } catch (err) {
        if (err instanceof TenantError || isOpen(connection)) throw err;
        this.log.warn('connection lost while checking tenants; checking on the next connection', { err: (err as Error).message });
        connection = await this.nextConnection(connection);
      }
    }
  }

  /** The first connection after `lost`, as the manager reconnects; rejected by `stop()`. */
  private nextConnection(lost: AmqpConnection): Promise<AmqpConnection> {
    const current = this.manager.connection;
    if (current !== undefined && current !== lost) return Promise.resolve(current);
    return new Promise<AmqpConnection>((resolve, reject) => {
      const connected = (connection: AmqpConnection): void => {
        this.stopWaiting = undefined;
        resolve(connection);
      };
      this.manager.once('connected', connected);
      this.stopWaiting = (err) => {
        this.stopWaiting = undefined;
        this.manager.off('connected', connected);
        reject(err);
      };
    });
  }

  /**
   * Ready messages in each runner's queue, read at scrape time on a throwaway channel, with the
   * bound in force on it (management API, at the same time; see QueueLimits).
   */
  private async queueDepths(): Promise<QueueDepthSample[]> {
    const connection = this.manager.connection;
    if (!connection) return [];
    const bounds = this.limits.maxSizes(this.runners.map((runner) => runner.queue));
    // A probe: a queue gone (a tenant retired under a pooled process) is skipped, not the scrape.
    const probe = new QueueProbe();
    probe.attach(connection);
    try {
      const samples: QueueDepthSample[] = [];
      const maxSizes = await bounds;
      for (const runner of [...this.runners]) {
        const depth = await probe.messageCount(runner.queue);
        if (depth === undefined) continue;
        samples.push({
          stage: runner.stageName,
          queue: runner.inputQueue,
          tenant: runner.tenant ?? '',
          physicalQueue: runner.queue,
          depth,
          ...withMaxSize(maxSizes?.get(runner.queue)),
        });
      }
      return samples;
    } finally {
      await probe.close();
    }
  }

  /**
   * The queue settings (policies) of the queues the group provisions, once: they live on the
   * broker, not in a connection. Through the management API, which local development may lack:
   * then the settings are not in force, and the group says so and runs anyway.
   */
  private async provisionSettings(): Promise<void> {
    try {
      await syncQueueSettings(
        this.config,
        this.instances.map((i) => i.stage.metadata),
        new ManagementApi(this.config.broker.management),
        { removeStale: false, log: this.log, onEvent: this.events.sink },
      );
    } catch (err) {
      this.log.warn(
        'queue settings (max_size, overflow_policy, dead_letter_ttl...) not applied: run `stagecoach apply` once the management API answers',
        {
          err: (err as Error).message,
        },
      );
    }
  }

  private async declare(connection: AmqpConnection): Promise<void> {
    if (!this.provision) return;
    await declareTopology(
      connection,
      provisionTopology(
        this.config,
        this.instances.map((i) => i.stage.metadata),
      ),
      this.log,
    );
  }

  private async attachAll(connection: AmqpConnection): Promise<void> {
    this.directives.attach(connection);
    await this.declare(connection);
    if (this.pool !== undefined) await this.attachPooled(this.pool, connection);
    else for (const runner of this.runners) await runner.attach(connection);
    await this.control.attach(connection);
    await this.membership?.attach(connection);
  }

  /**
   * Pooled: the shared channels first, then every tenant's topology in one declaration on
   * several channels and every queue state from one listing, then the runners, several at once.
   * One tenant at a time, each declaring on channels of its own and probing its markers, took
   * minutes for a thousand tenants.
   */
  private async attachPooled(pool: TenantPool, connection: AmqpConnection): Promise<void> {
    await pool.attach(connection);
    const runners = [...this.runners];
    // With broker-enforced tenants a stage user cannot declare: each runner checks its own.
    const declared = !this.config.security.tenantUsers;
    if (declared) {
      await declareTopology(connection, mergeTopologies(...runners.map((runner) => runner.topology)), this.log, {
        lanes: DECLARE_LANES,
        ...(await pool.drainMarkers()),
      });
    }
    const states = await pool.statesOf(runners.map((runner) => runner.target));
    await inParallel(
      runners.map((runner, i) => ({ runner, state: states[i] })),
      ATTACH_LANES,
      ({ runner, state }) => runner.attach(connection, { declared, ...(state === undefined ? {} : { state }) }),
    );
    this.log.info('tenants consuming', { tenants: runners.length, channels: pool.channels });
  }

  private async reattach(connection: AmqpConnection, attempt = 1): Promise<void> {
    if (this.stopped) return;
    try {
      await this.attachAll(connection);
    } catch (err) {
      if (!isOpen(connection)) {
        // The connection dropped again mid-way: the next 'connected' starts over.
        this.log.warn('re-attaching after reconnect failed; the connection went again', { err: (err as Error).message });
        return;
      }
      if (attempt < REATTACH_ATTEMPTS) {
        // A broker just restarted may refuse for a moment what it holds (a stream whose home
        // node "is down or inaccessible" until it has started): a few tries before giving up.
        this.log.warn('re-attaching after reconnect failed on a live connection; trying again', {
          attempt,
          err: (err as Error).message,
        });
        setTimeout(() => {
          if (this.manager.connection === connection) void this.reattach(connection, attempt + 1);
        }, REATTACH_RETRY_MS);
        return;
      }
      // Refused by a live broker (a queue declared elsewhere with other arguments): it will not
      // heal by itself, and a stage that silently stops consuming is the worst outcome.
      this.log.error('re-attaching after reconnect failed on a live connection; giving up', { err: (err as Error).message });
      this.fail(err as Error);
    }
  }

  /** Every given runner reads its queue's state again, on the current connection. */
  private async syncStates(runners: readonly StageRunner[]): Promise<void> {
    const connection = this.manager.connection;
    if (connection === undefined || !isOpen(connection)) return; // the next attach reads them
    await Promise.all(runners.filter((r) => !r.stopping).map((r) => r.syncState(connection)));
  }

  private async onControl(message: ControlMessage): Promise<void> {
    const matching = this.runners.filter((runner) => runner.matches(message));
    switch (message.command) {
      case 'pause':
      case 'drain':
      case 'resume':
        // Queue states live on the broker (setQueueState wrote them before sending this): read
        // them rather than trust the message, so a late or repeated message changes nothing.
        await this.syncStates(matching);
        break;
      case 'quiet':
        await Promise.all(matching.map((r) => r.quiet()));
        break;
      case 'directive':
        // The markers on the broker are the truth (batch-directives.ts set them before sending this).
        this.directives.forget({
          ...(message.batch === undefined ? {} : { batch: message.batch }),
          ...(message.tenant === undefined ? {} : { tenant: message.tenant }),
        });
        break;
      case 'terminate':
        if (this.pool !== undefined && message.tenant !== undefined) {
          // One tenant of a pooled process (`terminate --tenant T` before `tenant retire T`): that
          // tenant is released and the others go on; following the broker, it is not taken back
          // until provisioned again.
          this.membership?.exclude(message.tenant);
          await Promise.all(matching.map((r) => (r.tenant === undefined ? undefined : this.removeTenant(r.tenant))));
          break;
        }
        await Promise.all(matching.map((r) => r.stop(this.config.gracePeriod * 1000)));
        if (this.runners.every((r) => r.stopping)) this.terminate();
        break;
    }
  }
}

/** Tries of a re-attach refused on a live connection, a second apart, before the group fails. */
const REATTACH_ATTEMPTS = 5;
const REATTACH_RETRY_MS = 1000;

/** Names of runners not consuming that readiness spells out. */
const READINESS_NAMES = 5;

function withMaxSize(maxSize: number | undefined): { maxSize?: number } {
  return maxSize === undefined ? {} : { maxSize };
}
