import { EventEmitter } from 'node:events';
import { flowIntake } from './intake/flow-intake.js';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { ControlMessage } from '../control/control-protocol.js';
import type { Job } from '../job/job.types.js';
import type { InstanceMetrics } from '../observability/stage-metrics.js';
import { StateProbe } from '../queue-state/state-probe.js';
import type { QueueState } from '../queue-state/queue-state.js';
import type { Topology } from '../topology/topology.types.js';
import { ConsumeDecision } from './intake/consume-decision.js';
import type { InputKind } from './channels/delivery.js';
import { DeliveryPipeline } from './delivery-pipeline.js';
import type { Isolatable } from './intake/isolation-gate.js';
import { Lifecycle, type RunnerState } from './intake/lifecycle.js';
import type { AttachHints, PooledResources, StageRunnerOptions } from './runner-options.js';
import { RunnerResources } from './runner-resources.js';
import { emptyStats, NO_METRICS, type StageRunnerStats } from './settle/runner-stats.js';
import { resolveStageInput, type StageInput } from './stage-input.js';
import type { SuspectWatch } from './intake/suspect-watch.js';
import { WorkIntake } from './work-intake.js';

export type { RunnerState } from './intake/lifecycle.js';
export type { StageRunnerStats } from './settle/runner-stats.js';
export type { AttachHints, PooledResources, StageRunnerOptions } from './runner-options.js';
export { stallWindowMs } from './runner-resources.js';

/**
 * Runs one stage instance: one input queue, `concurrency` handlers at a time. Composed of a
 * {@link Lifecycle} (one stop promise) and the {@link ConsumeDecision} that every "consume now?"
 * asks; its {@link RunnerResources} (what it owns, and what it shares with a group or pool); its
 * {@link WorkIntake} (work consumers, suspect watch, dispatcher); a DeliveryProcessor (admission,
 * handler) and the {@link Settlement} (every ack, reject and republish). Each channel (publisher,
 * work, suspect) is healed alone by its ChannelSupervisor.
 *
 * Lifecycle: `start(connection)` builds the stage through its container, declares the topology
 * it needs on that connection (with `security.tenantUsers`, only checks that it exists: stage
 * users cannot declare) and starts consuming. After a connection loss the group calls
 * `attach()` with the next connection: nothing of the old channels is used, so a delivery of a
 * dead channel is never acknowledged on a new one (the broker redelivers it). `stop()` closes
 * the dispatcher (prefetched deliveries are handed back), cancels the consumers, waits for the
 * handlers in flight (up to a grace period), and closes the channels.
 *
 * Invariant (at-least-once, docs/failures.md): a delivery is acknowledged only after every job
 * its handler emitted, or whatever replaces it, has been confirmed by the broker.
 *
 * Emits 'state' (RunnerState) on every change, and 'fatal' (error) when a channel could not be
 * healed MAX_HEAL_ATTEMPTS times in a row while the connection was up.
 */
export class StageRunner extends EventEmitter implements Isolatable {
  readonly name: string;
  /** The physical input queue. */
  readonly queue: string;
  readonly stats: StageRunnerStats = emptyStats();
  /** What it declares (or checks) at start and when healing. */
  readonly topology: Topology;
  /** Its physical queue's state on the broker, as last read (`syncState`); it moves the lifecycle. */
  queueState: QueueState = 'active';

  /** Its input, checked against the configuration: settings, queue config, names, topology. */
  private readonly at: StageInput;
  private readonly metrics: InstanceMetrics;
  private readonly queues: Record<InputKind, string> & { dead: string };
  private readonly lifecycle: Lifecycle;
  private readonly decision: ConsumeDecision;
  private readonly resources: RunnerResources;
  private readonly intake: WorkIntake;
  /** The intake's, as the settlement tells it of a new suspect. */
  private readonly suspects: SuspectWatch;
  /** Its processor and {@link Settlement}: what a delivery goes through. */
  private readonly pipeline: DeliveryPipeline;

  constructor(private readonly options: StageRunnerOptions) {
    super();
    const { config, stage, tenant, variant, log } = options;
    const meta = stage.metadata;
    this.at = resolveStageInput(config, stage, tenant, variant);
    const { name, settings, queues, topology } = this.at;
    this.name = name;
    this.queues = queues;
    this.queue = queues.main;
    this.topology = topology;
    this.metrics = options.metrics ?? NO_METRICS;
    const fatal = (err: Error): void => void this.emit('fatal', err);
    this.resources = new RunnerResources(options, { settings, queue: this.queue, suspectQueue: queues.suspect, topology, onFatal: fatal });
    this.lifecycle = new Lifecycle((state) => {
      log[this.resources.notice]('stage state', { queue: this.queue, state });
      this.emit('state', state);
    });
    this.decision = new ConsumeDecision(this.lifecycle);
    this.intake = new WorkIntake({
      queues,
      resources: this.resources,
      decision: this.decision,
      log,
      onFatal: fatal,
      process: (delivery, handled) => this.pipeline.run(delivery, handled),
      handBack: (delivery) => this.pipeline.settlement.handBack(delivery),
      ...flowIntake(options.flow, { stage: meta.name, queue: meta.input, physical: this.queue, tenant }, () => this.pipeline.settlement),
    });
    this.suspects = this.intake.suspects;
    this.pipeline = new DeliveryPipeline(options, {
      at: this.at,
      resources: this.resources,
      stats: this.stats,
      metrics: this.metrics,
      onSuspected: () => this.suspects.moved(),
    });
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
    return this.intake.dispatcher.inFlight;
  }

  /** True from the first `stop()` on. */
  get stopping(): boolean {
    return this.lifecycle.stopping;
  }

  /** True while it consumes as it should: every channel up (running), or not meant to consume. */
  get healthy(): boolean {
    return this.decision.healthy(() => this.intake.channels);
  }

  /** A job of a remote stage was claimed by its worker (StageMetadata.remote): its `started` report, as a handler's start makes it. */
  started(job: Job): void {
    this.pipeline.settlement.started(job);
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
    if (this.pipeline.prepared) return;
    await this.pipeline.prepare();
    if (!this.lifecycle.to('running')) return;
    this.intake.open();
    this.resources.gate.join(this);
  }

  /**
   * Declares the stage's topology on `connection` and opens its channels there: at start and
   * after every reconnection. Consumers start unless paused, quiet or suspended.
   */
  async attach(connection: AmqpConnection, hints: AttachHints = {}): Promise<void> {
    if (this.lifecycle.stopping) return;
    this.resources.attachDirectives(connection);
    if (hints.declared !== true) await this.resources.declare(connection);
    // Before the consumers open: a paused queue is not consumed for a moment after a restart.
    if (hints.state === undefined) await this.syncState(connection);
    else await this.applyState(hints.state);
    await this.resources.attachPublishers(connection);
    await this.intake.attach(connection);
    this.options.log[this.resources.notice]('stage consuming', {
      queue: this.queue,
      concurrency: this.at.settings.concurrency,
      prefetch: this.at.settings.prefetch,
    });
  }

  /**
   * The connection is gone, and every channel with it: their deliveries are the broker's again
   * (waiting ones are dropped, settlements in progress leave theirs). The group attaches again.
   */
  detach(): void {
    this.resources.detach();
    this.intake.detach();
  }

  /**
   * Follows its physical queue's state on the broker (src/queue-state/queue-state.ts): `paused` stops
   * consuming, `active` and `draining` consume. Read at every attach (start, reconnect) and
   * whenever a state command says so; a quiet or stopping runner stays as it is.
   */
  async syncState(connection: AmqpConnection): Promise<void> {
    const probe = new StateProbe(connection, this.options.config.prefix);
    await this.applyState(await probe.stateOf(this.target).finally(() => probe.close()));
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
    await this.intake.stopTaking();
  }

  async resume(): Promise<void> {
    if (!this.lifecycle.to('running')) return;
    await this.intake.resume();
  }

  /** OJS `quiet` (docs/operations.md): stops fetching for good, finishes what it has, stays up until stopped. */
  async quiet(): Promise<void> {
    if (!this.lifecycle.to('quiet')) return;
    await this.intake.stopTaking();
  }

  /**
   * Stops consuming, hands prefetched deliveries back, finishes the jobs in flight within
   * `graceMs`, acknowledges them and closes the channels. A second call waits for the first.
   * @returns false when the grace period ran out: the unfinished jobs were handed back by
   * closing their channels (they come back flagged, as after a crash).
   */
  stop(graceMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    return this.lifecycle.stop(async () => {
      await this.intake.stopTaking();
      const drained = await this.intake.dispatcher.whenIdle(graceMs);
      if (!drained) {
        this.options.log.warn('grace period over: handing unfinished jobs back to the broker', {
          queue: this.queue,
          in_flight: this.intake.dispatcher.inFlight,
        });
      }
      this.resources.gate.leave(this);
      this.intake.dispatcher.leaveShare();
      await this.resources.close(drained, () => this.intake.close());
      this.options.log.info('stage stopped', { queue: this.queue, drained, ...this.stats });
      return drained;
    });
  }

  /** The gate isolates a suspect: nothing of this runner stays in hand (see IsolationGate). */
  suspend(): Promise<void> {
    return this.intake.suspend();
  }

  unsuspend(): void {
    this.intake.unsuspend();
  }
}
