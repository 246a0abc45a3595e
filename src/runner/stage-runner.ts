import { EventEmitter } from 'node:events';
import type { Options } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher, type PublishChannel, type QueueFullObserver } from '../broker/confirm-publisher.js';
import { ensureTopology } from '../broker/declare-topology.js';
import { JobRouter } from '../broker/job-router.js';
import type { CompiledConfig, CompiledStageConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import type { ControlMessage } from '../control/control-protocol.js';
import { ConfigError, PublishError, StagecoachError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import type { InstanceMetrics } from '../observability/stage-metrics.js';
import { createStageInstance } from '../stage/stage-container.js';
import type { LoadedStage } from '../stage/stage-loader.js';
import type { StageHandler } from '../stage/stage.types.js';
import { createThreadedHandler, type ThreadedHandler } from '../stage/threads/threaded-handler.js';
import { identitiesOf } from '../security/broker-users.js';
import { PublisherCheck } from '../security/publisher-check.js';
import { stageTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import { publishRecord } from '../batch/tracking-stream.js';
import type { PayloadOffloader } from '../payload/payload-offloader.js';
import type { Topology } from '../topology/topology.types.js';
import { checkTenantSlug } from '../util/tenant-slug.js';
import { ChannelSupervisor } from './channel-supervisor.js';
import type { Delivery, InputKind } from './delivery.js';
import { DeliveryProcessor, isRedelivery } from './delivery-processor.js';
import { DirectiveGate } from './directive-gate.js';
import { Dispatcher } from './dispatcher.js';
import { IsolationGate, type Isolatable } from './isolation-gate.js';
import type { FairShare } from './fair-share.js';
import type { QueueProbe, SharedChannel } from './shared-channel.js';
import { EventLoopWatch } from './event-loop-watch.js';
import { Lifecycle, type RunnerState } from './lifecycle.js';
import { LossLedger } from './loss-ledger.js';
import { emptyStats, NO_METRICS, type StageRunnerStats } from './runner-stats.js';
import { Settlement } from './settlement.js';
import { SuspectWatch } from './suspect-watch.js';
import { StateProbe } from '../state/state-probe.js';
import type { QueueState } from '../state/queue-state.js';
import { WorkConsumers } from './work-consumers.js';

export type { RunnerState } from './lifecycle.js';
export type { StageRunnerStats } from './runner-stats.js';

export interface StageRunnerOptions {
  config: CompiledConfig;
  stage: LoadedStage;
  /** Required when the stage's input is tenant-scoped; refused when it is shared. */
  tenant?: string;
  /** Consume the tenant's specialised queue for this variant instead of the general one. */
  variant?: string;
  log: Logger;
  /** Where the instance counts its work; nothing is counted when absent. */
  metrics?: InstanceMetrics;
  /**
   * Shared by every runner of a process (StageGroup passes one), so that a suspect runs with
   * nothing else of the process in hand. A runner alone gets its own.
   */
  gate?: IsolationGate;
  /** How often a running instance looks for suspects it was not told about. @defaultValue 5000 ms */
  suspectCheckMs?: number;
  /**
   * Shared by every runner of a process (StageGroup passes one): what the process lost with a
   * channel while healthy, so that its redelivery is not taken for a crash. A runner alone gets
   * its own.
   */
  ledger?: LossLedger;
  /** Told of every publish a full queue refused (emits, dead letters): `queue.full` events and metrics. */
  onQueueFull?: QueueFullObserver;
  /** One tenant of a pooled process (TenantPool): channels, slots and threads shared with the others. */
  pooled?: PooledResources;
  /**
   * Shared by every runner of a process (StageGroup passes one, attached to its connection):
   * batch and tenant directives. A runner alone gets its own and attaches it itself.
   */
  directives?: DirectiveGate;
  /**
   * Payload offloading (docs/payloads.md), shared by every runner of a process (StageGroup
   * passes one, with one store). Without it, jobs go inline whatever their size, and a job that
   * arrives by reference fails.
   */
  payloads?: PayloadOffloader;
}

/**
 * What the runners of a pooled process share. Each still has its own queues, settlement,
 * lifecycle (pause, drain, quiet per tenant queue) and stage instance; the pool owns these and
 * attaches, heals and closes them.
 */
export interface PooledResources {
  /** The process's confirm channel, for every tenant's emits and settlements. */
  publishers: ChannelSupervisor<ConfirmPublisher>;
  /** The work channel this tenant's consumers go on (one per so many tenants). */
  work: SharedChannel;
  /** The channel suspects are taken from, one at a time, process-wide. */
  suspects: SharedChannel;
  /** Where queues are looked at (passive declares), so that a missing one closes no shared channel. */
  probe: QueueProbe;
  /** The stage's `concurrency` slots, shared by weight. */
  share: FairShare;
  weight: number;
  maxConcurrency: number | undefined;
  /** Deliveries the broker may send ahead, per consumer of this tenant. */
  prefetch: number;
  /** A handler serving every tenant (worker threads shared by the pool); else one stage instance per tenant, built at its first job. */
  handler?: StageHandler;
  /**
   * false: when healing, only check that the input queue still exists, never declare it again
   * (`--all-tenants`: a queue gone with its retired tenant must not come back). @defaultValue true
   */
  redeclare?: boolean;
}

/** What a pooled runner is told at attach instead of finding out itself (the pool asked the broker for every tenant at once). */
export interface AttachHints {
  /** Its topology was declared with every other tenant's. */
  declared?: boolean;
  /** Its queue's state, read from one listing. */
  state?: QueueState;
}

/**
 * Runs one stage instance: one input queue, `concurrency` handlers at a time. Composed of:
 * - a {@link Lifecycle} (starting, running, paused, quiet, stopping, stopped; one stop promise);
 * - three channels, each healed alone by its {@link ChannelSupervisor}: the publisher (one
 *   confirm channel), the {@link WorkConsumers} (consumers of `main` and `due`) and the
 *   {@link SuspectWatch} (looks for suspects and runs them through the gate);
 * - a {@link Dispatcher} (slots, hand-backs) and the process-wide {@link IsolationGate} (a
 *   suspect runs alone);
 * - a {@link DeliveryProcessor} (admission, handler) and the {@link Settlement} (every ack,
 *   reject and republish).
 *
 * Lifecycle: `start(connection)` builds the stage through its container, declares the topology
 * it needs on that connection (with `security.tenantUsers`, only checks that it exists: stage
 * users cannot declare) and starts consuming. After a connection loss the group calls
 * `attach()` with the next connection: nothing of the old channels is used, so a delivery of a
 * dead channel is never acknowledged on a new one (the broker redelivers it). `stop()` closes
 * the dispatcher (prefetched deliveries are handed back), cancels the consumers, waits for the
 * handlers in flight (up to a grace period), and closes the channels.
 *
 * Invariant (at-least-once, seeds/004): a delivery is acknowledged only after every job its
 * handler emitted, or whatever replaces it, has been confirmed by the broker.
 *
 * Emits 'state' (RunnerState) on every change, and 'fatal' (error) when a channel could not be
 * healed MAX_HEAL_ATTEMPTS times in a row while the connection was up.
 */
export class StageRunner extends EventEmitter implements Isolatable {
  readonly name: string;
  /** The physical input queue. */
  readonly queue: string;
  readonly stats: StageRunnerStats = emptyStats();

  private readonly settings: CompiledStageConfig;
  private readonly metrics: InstanceMetrics;
  private readonly input: ResolvedQueueConfig;
  private readonly queues: Record<InputKind, string> & { dead: string };
  /** What it declares (or checks) at start and when healing. */
  readonly topology: Topology;
  private readonly lifecycle: Lifecycle;
  private readonly gate: IsolationGate;
  private readonly directives: DirectiveGate;
  /** Set when no group shares one: attached and closed by this runner. */
  private readonly ownDirectives: DirectiveGate | undefined;
  private readonly ledger: LossLedger;
  private readonly ownWatch: EventLoopWatch | undefined;
  private readonly publishers: ChannelSupervisor<ConfirmPublisher>;
  private readonly work: WorkConsumers;
  private readonly suspects: SuspectWatch;
  private readonly dispatcher: Dispatcher;
  private readonly settlement: Settlement;
  private readonly sink: JobRouter;
  private processor: DeliveryProcessor | undefined;
  private handler: StageHandler | undefined;
  private suspensions = 0;
  /** Its physical queue's state on the broker, as last read (`syncState`). */
  queueState: QueueState = 'active';

  constructor(private readonly options: StageRunnerOptions) {
    super();
    const { config, stage, tenant, variant, log } = options;
    const meta = stage.metadata;
    const settings = config.stages.get(meta.name);
    if (!settings) throw new ConfigError(config.source, `stages.${meta.name}`, 'a configured stage');
    this.settings = settings;
    this.metrics = options.metrics ?? NO_METRICS;
    // Library users reach here without the command line's check: the tenant and variant become
    // queue names, where a dotted tenant would name another tenant's variant queue.
    if (tenant !== undefined) checkTenantSlug(tenant, `stage "${meta.name}": tenant`);
    const input = queueFor(config, meta.input, `stage "${meta.name}"`);
    this.input = input;
    if (input.scope === 'tenant' && tenant === undefined) {
      throw new ConfigError(
        config.source,
        `queues.${meta.input}`,
        `a tenant for stage "${meta.name}": its input is tenant-scoped (use --tenant)`,
      );
    }
    if (input.scope === 'shared' && tenant !== undefined) {
      throw new ConfigError(config.source, `queues.${meta.input}`, `no --tenant for stage "${meta.name}": its input is shared`);
    }
    // Own keys only: `--variant constructor` must not find Object.prototype.constructor.
    if (variant !== undefined && !Object.hasOwn(input.variants?.values ?? {}, variant)) {
      const known = Object.keys(input.variants?.values ?? {}).join(', ') || 'none';
      throw new ConfigError(config.source, `queues.${meta.input}.variants.values.${variant}`, `a configured variant (known: ${known})`);
    }
    const names = new BrokerNames(config.prefix);
    this.queue = names.queue(meta.input, tenant, variant);
    this.queues = {
      main: this.queue,
      due: names.dueQueue(meta.input, tenant, variant),
      suspect: names.suspectQueue(meta.input, tenant, variant),
      dead: names.deadQueue(meta.input, tenant),
    };
    this.topology = stageTopology(config, meta, tenant);
    this.name = [meta.name, tenant, variant].filter((part) => part !== undefined).join('/');
    this.lifecycle = new Lifecycle((state) => {
      // A pooled process of a thousand tenants would say it a thousand times at start.
      log[options.pooled === undefined ? 'info' : 'debug']('stage state', { queue: this.queue, state });
      this.emit('state', state);
    });
    this.gate = options.gate ?? new IsolationGate();
    if (options.directives === undefined) this.ownDirectives = new DirectiveGate(config.prefix, log);
    this.directives = options.directives ?? (this.ownDirectives as DirectiveGate);
    if (options.ledger === undefined) this.ownWatch = new EventLoopWatch();
    this.ledger = options.ledger ?? new LossLedger(this.ownWatch as EventLoopWatch, stallWindowMs(config));

    const fatal = (err: Error): void => void this.emit('fatal', err);
    const pooled = options.pooled;
    const shared = pooled === undefined ? {} : { shared: { channel: pooled.work, probe: pooled.probe } };
    this.publishers =
      pooled?.publishers ??
      new ChannelSupervisor<ConfirmPublisher>({
        name: 'publisher',
        log,
        onFatal: fatal,
        isOpen: (publisher) => publisher.isOpen,
        open: async (connection, lost, healing) => {
          if (healing) await ensureTopology(connection, config, this.topology, log);
          return ConfirmPublisher.open(connection, () => lost('publisher channel closed'), options.onQueueFull);
        },
        close: (publisher) => publisher.close(),
      });
    this.work = new WorkConsumers({
      queues: { main: this.queues.main, due: this.queues.due },
      prefetch: pooled?.prefetch ?? settings.prefetch,
      ...shared,
      declare: (connection) => this.declare(connection),
      log,
      wanted: () => this.lifecycle.state === 'running' && this.suspensions === 0,
      offer: (delivery) => this.dispatcher.offer(delivery),
      // Its waiting deliveries are the broker's again: running them would only make duplicates.
      abandon: (source) => this.dispatcher.abandonWaiting((delivery) => delivery.source === source),
      onFatal: fatal,
      lost: (ids) => this.ledger.record(ids),
    });
    this.suspects = new SuspectWatch({
      queue: this.queues.suspect,
      declare: (connection) => this.declare(connection),
      log,
      gate: this.gate,
      running: () => this.lifecycle.state === 'running',
      runAlone: (delivery) => this.dispatcher.runAlone(delivery),
      onFatal: fatal,
      lost: (ids) => this.ledger.record(ids),
      ...(options.suspectCheckMs === undefined ? {} : { checkMs: options.suspectCheckMs }),
      ...(pooled === undefined ? {} : { shared: { channel: pooled.suspects, probe: pooled.probe } }),
    });
    this.dispatcher = new Dispatcher({
      concurrency: settings.concurrency,
      ...(pooled === undefined
        ? {}
        : {
            share: {
              pool: pooled.share,
              weight: pooled.weight,
              ...(pooled.maxConcurrency === undefined ? {} : { maxConcurrency: pooled.maxConcurrency }),
            },
          }),
      process: (delivery) => this.process(delivery),
      // A redelivered delivery carries a crash: handed back unflagged, it would lose it and could
      // run in the pool as a first delivery. It is settled as the crash it is instead (moved to
      // the suspect queue, unjudged); its handler does not run.
      giveBack: (delivery) =>
        isRedelivery(delivery) && !this.ledger.forgive(delivery.message.properties.messageId)
          ? this.process(delivery)
          : this.settlement.giveBack(delivery),
    });
    this.settlement = new Settlement({
      config,
      input,
      stage: meta.name,
      queues: { due: this.queues.due, suspect: this.queues.suspect, dead: this.queues.dead },
      origin: { queue: this.queue, tenant, variant },
      publishers: this.publishers,
      log,
      stats: this.stats,
      metrics: this.metrics,
      onSuspected: () => this.suspects.mayWait(0),
      ...(options.payloads === undefined ? {} : { payloads: options.payloads }),
    });
    this.sink = new JobRouter(config, this.healingPublisher(), options.payloads);
  }

  get stageName(): string {
    return this.options.stage.metadata.name;
  }

  /** The logical input queue. */
  get inputQueue(): string {
    return this.options.stage.metadata.input;
  }

  get tenant(): string | undefined {
    return this.options.tenant;
  }

  /** Its physical queue as queue states name it. */
  get target(): { queue: string; tenant?: string; variant?: string } {
    const { tenant, variant } = this.options;
    return { queue: this.inputQueue, ...(tenant === undefined ? {} : { tenant }), ...(variant === undefined ? {} : { variant }) };
  }

  /** Pooled: what it shares with the other tenants of its process. */
  get pooledResources(): PooledResources | undefined {
    return this.options.pooled;
  }

  get state(): RunnerState {
    return this.lifecycle.state;
  }

  /** Jobs being processed or settled now. */
  get inFlight(): number {
    return this.dispatcher.inFlight;
  }

  /** True from the first `stop()` on. */
  get stopping(): boolean {
    return this.lifecycle.stopping;
  }

  /** True while it consumes as it should: every channel up (running), or not meant to consume. */
  get healthy(): boolean {
    const state = this.lifecycle.state;
    if (state === 'starting') return false;
    if (state !== 'running') return true;
    if (this.publishers.current === undefined || !this.suspects.open || !this.work.open) return false;
    // Suspended while a suspect runs alone: consumers are off on purpose.
    return this.suspensions > 0 || this.work.consuming;
  }

  /** Whether a control message addresses this instance. */
  matches(message: ControlMessage): boolean {
    if (message.tenant !== undefined && message.tenant !== this.options.tenant) return false;
    if (message.queue !== undefined && message.queue !== this.options.stage.metadata.input) return false;
    return message.stage === undefined || message.stage === this.options.stage.metadata.name;
  }

  /** Builds the stage, then attaches to `connection`. */
  async start(connection: AmqpConnection): Promise<void> {
    await this.prepare();
    await this.attach(connection);
  }

  /**
   * Builds the stage (its container, or its worker threads) and enters `running`; needs no
   * broker. `attach()` then connects it. Called once.
   */
  async prepare(): Promise<void> {
    if (this.processor !== undefined) return;
    const { config, stage, tenant, variant, log, pooled } = this.options;
    if (pooled !== undefined) {
      // A thousand tenants must not cost a thousand containers up front: built at the first job.
      this.handler = pooled.handler ?? lazyHandler(() => createStageInstance(stage, config, tenant, log, variant));
    } else {
      this.handler = this.settings.threads
        ? await createThreadedHandler({ stage, config, tenant, variant, threads: this.settings.threads, log })
        : await createStageInstance(stage, config, tenant, log, variant);
    }
    const tracking = new BrokerNames(config.prefix).tracking;
    this.processor = new DeliveryProcessor({
      stage: stage.metadata,
      input: this.input,
      tenant,
      tenantHeader: config.tenantHeader,
      handler: this.handler,
      sink: this.sink,
      log,
      onPublished: (output) => this.metrics.published(output),
      forgive: (messageId) => this.ledger.forgive(messageId),
      ...(config.security.tenantUsers ? { publisherCheck: new PublisherCheck(identitiesOf(config), tenant) } : {}),
      directives: this.directives,
      track: (record) => publishRecord(this.healingPublisher(), tracking, record),
      ...(this.options.payloads === undefined ? {} : { payloads: this.options.payloads }),
    });
    if (!this.lifecycle.to('running')) return;
    this.dispatcher.openUp();
    this.gate.join(this);
  }

  /**
   * Declares the stage's topology on `connection` and opens its channels there: at start and
   * after every reconnection. Consumers start unless paused, quiet or suspended.
   */
  async attach(connection: AmqpConnection, hints: AttachHints = {}): Promise<void> {
    if (this.lifecycle.stopping) return;
    this.ownDirectives?.attach(connection);
    if (hints.declared !== true) await this.declare(connection);
    // Before the consumers open: a paused queue is not consumed for a moment after a restart.
    if (hints.state === undefined) await this.syncState(connection);
    else await this.applyState(hints.state);
    if (this.options.pooled === undefined) await this.publishers.attach(connection);
    await this.suspects.attach(connection);
    await this.work.attach(connection);
    this.options.log[this.options.pooled === undefined ? 'info' : 'debug']('stage consuming', {
      queue: this.queue,
      concurrency: this.settings.concurrency,
      prefetch: this.settings.prefetch,
    });
  }

  /**
   * The connection is gone, and every channel with it: their deliveries are the broker's again
   * (waiting ones are dropped, settlements in progress leave theirs). The group attaches again.
   */
  detach(): void {
    if (this.options.pooled === undefined) this.publishers.detach();
    this.work.detach();
    this.suspects.detach();
  }

  /**
   * Follows its physical queue's state on the broker (src/state/queue-state.ts): `paused` stops
   * consuming, `active` and `draining` consume. Read at every attach (start, reconnect) and
   * whenever a state command says so; a quiet or stopping runner stays as it is.
   */
  async syncState(connection: AmqpConnection): Promise<void> {
    const probe = new StateProbe(connection, this.options.config.prefix);
    let state: QueueState;
    try {
      state = await probe.stateOf({ queue: this.inputQueue, tenant: this.options.tenant, variant: this.options.variant });
    } finally {
      await probe.close();
    }
    await this.applyState(state);
  }

  /** Follows `state`, read by `syncState` or by the pool for every tenant at once. */
  async applyState(state: QueueState): Promise<void> {
    if (state !== this.queueState) this.options.log.info('queue state', { queue: this.queue, state });
    this.queueState = state;
    if (state === 'paused') await this.pause();
    else if (this.lifecycle.state === 'paused') await this.resume();
  }

  /** Stops consuming until `resume()`; prefetched deliveries go back, jobs in flight finish. */
  async pause(): Promise<void> {
    if (!this.lifecycle.to('paused')) return;
    await this.stopTakingWork();
  }

  async resume(): Promise<void> {
    if (!this.lifecycle.to('running')) return;
    if (this.suspensions === 0) this.dispatcher.openUp();
    await this.work.sync();
    this.suspects.mayWait(0);
  }

  /** OJS `quiet`: stops fetching for good, finishes what it has, stays up until stopped. */
  async quiet(): Promise<void> {
    if (!this.lifecycle.to('quiet')) return;
    await this.stopTakingWork();
  }

  /**
   * Stops consuming, hands prefetched deliveries back, finishes the jobs in flight within
   * `graceMs`, acknowledges them and closes the channels. A second call waits for the first.
   * @returns false when the grace period ran out: the unfinished jobs were handed back by
   * closing their channels (they come back flagged, as after a crash).
   */
  stop(graceMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    return this.lifecycle.stop(async () => {
      await this.stopTakingWork();
      const drained = await this.dispatcher.whenIdle(graceMs);
      if (!drained) {
        this.options.log.warn('grace period over: handing unfinished jobs back to the broker', {
          queue: this.queue,
          in_flight: this.dispatcher.inFlight,
        });
      }
      this.gate.leave(this);
      this.dispatcher.leaveShare();
      if (this.options.pooled === undefined) await this.publishers.close();
      // A grace period that ran out is not granted twice: the threads end now.
      if (this.options.pooled?.handler === undefined) {
        await (this.handler as Partial<ThreadedHandler> | undefined)?.close?.(drained ? undefined : 0);
      }
      await this.suspects.close();
      await this.work.close();
      this.ownWatch?.close();
      await this.ownDirectives?.close();
      this.options.log.info('stage stopped', { queue: this.queue, drained, ...this.stats });
      return drained;
    });
  }

  async suspend(): Promise<void> {
    this.suspensions++;
    await this.stopTakingWork();
    await this.dispatcher.whenIdle();
    // Nothing in hand means nothing the broker does not know is settled.
    await this.work.settled();
  }

  unsuspend(): void {
    this.suspensions--;
    if (this.suspensions > 0 || this.lifecycle.state !== 'running') return;
    this.dispatcher.openUp();
    void this.work.sync();
  }

  /**
   * Declares what the instance needs, or with broker-enforced tenants (no configure permission)
   * checks that `provision` did.
   */
  private async declare(connection: AmqpConnection): Promise<void> {
    const pooled = this.options.pooled;
    if (pooled?.redeclare === false) {
      if ((await pooled.probe.messageCount(this.queue)) === undefined) {
        throw new StagecoachError('NOT_FOUND', `queue "${this.queue}" is gone (its tenant retired, or the queue deleted)`);
      }
      return;
    }
    await ensureTopology(connection, this.options.config, this.topology, this.options.log);
  }

  /** Consumers off first, then what was prefetched goes back: it cannot come back to us. */
  private async stopTakingWork(): Promise<void> {
    this.dispatcher.hold();
    await this.work.sync();
    await this.dispatcher.close();
  }

  private async process(delivery: Delivery): Promise<void> {
    // Its channel died while it waited: the broker redelivers it; running it would duplicate.
    if (delivery.source.closed) return;
    this.metrics.consumed();
    const outcome = await (this.processor as DeliveryProcessor).run(delivery);
    await this.settlement.settle(delivery, outcome);
  }

  /** Emits publish on whatever publisher channel is open now, waiting while it heals. */
  private healingPublisher(): PublishChannel {
    return {
      publish: (exchange: string, routingKey: string, content: Buffer, options: Options.Publish): Promise<void> => {
        const publisher = this.publishers.current;
        if (publisher !== undefined) return publisher.publish(exchange, routingKey, content, options);
        return this.publishers.ready().then(
          (healed) => healed.publish(exchange, routingKey, content, options),
          (err: Error) => Promise.reject(new PublishError(`cannot publish to "${exchange}": ${err.message}`, exchange, routingKey, true)),
        );
      },
    };
  }
}

/**
 * A stall this recent blames a lost connection on the jobs in hand: the broker drops a client
 * after two missed heartbeats, so a stall that caused the loss began at most that long before.
 */
export function stallWindowMs(config: CompiledConfig): number {
  return (2 * config.broker.heartbeat + 5) * 1000;
}

/** A handler that builds the real one at its first job, once (a failure is retried at the next). */
function lazyHandler(build: () => Promise<StageHandler>): StageHandler {
  let built: Promise<StageHandler> | undefined;
  return {
    handle: async (job, ctx) => {
      built ??= build().catch((err: unknown) => {
        built = undefined;
        throw err;
      });
      return (await built).handle(job, ctx);
    },
  };
}
