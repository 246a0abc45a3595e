import { EventEmitter } from 'node:events';
import type { ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { isOpen } from '../broker/connection-state.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { declareTopology } from '../broker/declare-topology.js';
import { JobRouter } from '../broker/job-router.js';
import type { CompiledConfig, CompiledStageConfig, ResolvedQueueConfig } from '../config/config.types.js';
import { queueFor } from '../config/queue-resolver.js';
import { ConfigError, InvalidPayloadError, StagecoachError } from '../errors/errors.js';
import { fromWire } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import { stageTopology } from '../topology/build-topology.js';
import { BrokerNames } from '../topology/names.js';
import type { ControlMessage } from '../control/control-protocol.js';
import type { InstanceMetrics } from '../observability/stage-metrics.js';
import { inJobSpan, sdkRegistered } from '../observability/tracing.js';
import { toJobError } from './dead-letters.js';
import { ConsumerSource } from './consumer-source.js';
import { FailureHandler } from './failure-handler.js';
import { createThreadedHandler, type ThreadedHandler } from './threads/threaded-handler.js';
import { invokeHandler } from './handler-invoker.js';
import { JobContext } from './job-context.js';
import { createStageInstance } from './stage-container.js';
import type { LoadedStage } from './stage-loader.js';
import type { StageHandler } from './stage.types.js';

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
}

/** Failed re-attaches in a row, on a live connection, before a runner gives up. */
const MAX_HEAL_ATTEMPTS = 5;

/** Counts nothing: for runners used without a metrics registry. */
const NO_METRICS: InstanceMetrics = {
  consumed: () => undefined,
  completed: () => undefined,
  failed: () => undefined,
  retried: () => undefined,
  deadLettered: () => undefined,
  discarded: () => undefined,
  published: () => undefined,
  acked: () => undefined,
};

/**
 * OJS worker states (seeds/003) plus queue pause (seeds/001): `running` consumes; `paused`
 * stops consuming until resumed; `quiet` stops consuming for good but finishes what it has;
 * `stopped` after `stop()`.
 */
export type RunnerState = 'starting' | 'running' | 'paused' | 'quiet' | 'stopped';

export interface StageRunnerStats {
  completed: number;
  emitted: number;
  retried: number;
  deadLettered: number;
  discarded: number;
  /** Deliveries that came back after the process handling them died. */
  poisonRedeliveries: number;
}

/**
 * Runs one stage instance: one input queue, `concurrency` handlers at a time.
 *
 * Lifecycle: `start(connection)` builds the stage through its container, declares the
 * topology it needs and starts consuming. On a new connection after a loss, `attach()` does the
 * declaring and consuming again on fresh channels: nothing of the old channels is used, so a
 * delivery of a dead channel is never acknowledged on a new one (the broker redelivers it). A
 * channel that closes while its connection lives (a channel error, a deleted queue) is healed
 * the same way. `stop()` cancels the consumers, hands prefetched but unstarted deliveries back,
 * waits for the handlers in flight (up to a grace period), and closes its channels.
 *
 * Invariant (at-least-once, seeds/004): a delivery is acknowledged only after every job its
 * handler emitted, or its dead letter, has been confirmed by the broker. If the process dies
 * before that, the broker redelivers it.
 *
 * Emits 'state' (RunnerState) on every change, and 'fatal' (error) when healing a lost channel
 * failed MAX_HEAL_ATTEMPTS times in a row while the connection was up.
 */
export class StageRunner extends EventEmitter {
  readonly name: string;
  readonly queue: string;
  readonly stats: StageRunnerStats = { completed: 0, emitted: 0, retried: 0, deadLettered: 0, discarded: 0, poisonRedeliveries: 0 };

  private readonly settings: CompiledStageConfig;
  private readonly metrics: InstanceMetrics;
  private readonly input: ResolvedQueueConfig;
  private readonly suspectQueue: string;
  private readonly waiting: Array<{ message: ConsumeMessage; source: ConsumerSource }> = [];
  private readonly sources: ConsumerSource[] = [];
  /** Sources whose consumer was cancelled: each closes once its last job in flight settles. */
  private readonly retired = new Set<ConsumerSource>();
  private inFlight = 0;
  private current: RunnerState = 'starting';
  private connection: AmqpConnection | undefined;
  private healing: NodeJS.Timeout | undefined;
  private healFailures = 0;
  private publisher: ConfirmPublisher | undefined;
  private router: JobRouter | undefined;
  private failures: FailureHandler | undefined;
  private handler: StageHandler | undefined;
  private idle: (() => void) | undefined;

  constructor(private readonly options: StageRunnerOptions) {
    super();
    const { config, stage, tenant, variant } = options;
    const meta = stage.metadata;
    const settings = config.stages.get(meta.name);
    if (!settings) throw new ConfigError(config.source, `stages.${meta.name}`, 'a configured stage');
    this.settings = settings;
    this.metrics = options.metrics ?? NO_METRICS;
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
    if (variant !== undefined && !input.variants?.values[variant]) {
      const known = Object.keys(input.variants?.values ?? {}).join(', ') || 'none';
      throw new ConfigError(config.source, `queues.${meta.input}.variants.values.${variant}`, `a configured variant (known: ${known})`);
    }
    const names = new BrokerNames(config.prefix);
    this.queue = names.queue(meta.input, tenant, variant);
    this.suspectQueue = names.suspectQueue(meta.input, tenant, variant);
    this.name = [meta.name, tenant, variant].filter((part) => part !== undefined).join('/');
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

  get state(): RunnerState {
    return this.current;
  }

  /** True while every consumer it should have is up (running) or it is meant not to consume. */
  get healthy(): boolean {
    if (this.current === 'running') return this.sources.length === 2 && this.sources.every((s) => s.consumerTag !== undefined && !s.closed);
    return this.current !== 'starting';
  }

  /** Whether a control message addresses this instance. */
  matches(message: ControlMessage): boolean {
    if (message.tenant !== undefined && message.tenant !== this.options.tenant) return false;
    if (message.queue !== undefined && message.queue !== this.options.stage.metadata.input) return false;
    return message.stage === undefined || message.stage === this.options.stage.metadata.name;
  }

  get stopping(): boolean {
    return this.current === 'stopped';
  }

  /** Builds the stage, then attaches to `connection`. */
  async start(connection: AmqpConnection): Promise<void> {
    const { config, stage, tenant, log } = this.options;
    this.handler = this.settings.threads
      ? await createThreadedHandler({ stage, config, tenant, variant: this.options.variant, threads: this.settings.threads, log })
      : await createStageInstance(stage, config, tenant, log, this.options.variant);
    this.setState('running');
    await this.attach(connection);
  }

  /**
   * (Re)declares the stage's topology and opens its channels on `connection`: a publisher, and
   * consumers unless paused or quiet. Called at start and after every reconnection.
   */
  async attach(connection: AmqpConnection): Promise<void> {
    if (this.stopping) return;
    this.detach();
    this.connection = connection;
    isOpen(connection);
    const { config, stage, tenant, log } = this.options;
    await declareTopology(config, stageTopology(config, stage.metadata, tenant), log);
    this.publisher = await ConfirmPublisher.open(connection, () => this.onChannelLost(connection, 'publisher'));
    this.router = new JobRouter(config, this.publisher);
    this.failures = new FailureHandler({
      config,
      input: this.input,
      tenant,
      stage: stage.metadata.name,
      publisher: this.publisher,
      router: this.router,
      log,
      stats: this.stats,
      metrics: this.metrics,
    });
    if (this.current === 'running') await this.consumeAll();
  }

  /**
   * Forgets the channels of a lost connection. Deliveries waiting to start are dropped: the
   * broker redelivers them. Handlers in flight finish, but their acknowledgements fail and
   * their jobs come back too (at-least-once).
   */
  detach(): void {
    clearTimeout(this.healing);
    this.waiting.length = 0;
    const publisher = this.publisher;
    this.publisher = undefined;
    void publisher?.close();
    for (const source of [...this.sources.splice(0), ...this.retired]) {
      source.abandon();
      source.channel.close().catch(() => undefined);
    }
    this.retired.clear();
  }

  /** Stops consuming until `resume()`; jobs in flight finish. */
  async pause(): Promise<void> {
    if (this.current !== 'running') return;
    this.setState('paused');
    await this.cancelConsumers();
  }

  async resume(): Promise<void> {
    if (this.current !== 'paused') return;
    this.setState('running');
    await this.consumeAll();
  }

  /** OJS `quiet`: stops fetching for good, finishes what it has, stays up until stopped. */
  async quiet(): Promise<void> {
    if (this.current !== 'running' && this.current !== 'paused') return;
    this.setState('quiet');
    await this.cancelConsumers();
  }

  /**
   * Stops consuming, finishes the jobs in flight within `graceMs`, confirms their outputs,
   * acknowledges them and closes the runner's channels.
   * @returns false when the grace period ran out: the unfinished jobs were handed back by
   * closing their channels.
   */
  async stop(graceMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    if (this.stopping) return true;
    this.setState('stopped');
    clearTimeout(this.healing);
    await this.cancelConsumers();
    const drained = await this.whenIdle(graceMs);
    if (!drained)
      this.options.log.warn('grace period over: handing unfinished jobs back to the broker', {
        queue: this.queue,
        in_flight: this.inFlight,
      });
    await this.publisher?.close();
    // A grace period that ran out is not granted twice: the threads end now.
    await (this.handler as Partial<ThreadedHandler> | undefined)?.close?.(drained ? undefined : 0);
    // After a grace period that ran out, closing hands the unfinished deliveries back.
    for (const source of this.retired) {
      source.flush();
      await source.channel.close().catch(() => undefined);
    }
    this.retired.clear();
    this.options.log.info('stage stopped', { queue: this.queue, drained, ...this.stats });
    return drained;
  }

  private setState(state: RunnerState): void {
    if (this.current === state) return;
    this.current = state;
    this.options.log.info('stage state', { queue: this.queue, state });
    this.emit('state', state);
  }

  private async consumeAll(): Promise<void> {
    const connection = this.connection;
    if (!connection || this.sources.length > 0) return;
    // Consume and publish on separate channels: a consumer's flow never waits on confirms.
    await this.consume(connection, this.queue, 'main', this.settings.prefetch);
    // Suspects run one at a time: when one kills the process, it is the only one in hand.
    await this.consume(connection, this.suspectQueue, 'suspect', 1);
    this.options.log.info('stage consuming', {
      queue: this.queue,
      concurrency: this.settings.concurrency,
      prefetch: this.settings.prefetch,
    });
  }

  /**
   * Cancels the consumers and retires their channels: a retired channel stays open for the
   * acknowledgements of its jobs in flight and closes after the last one.
   */
  private async cancelConsumers(): Promise<void> {
    const sources = this.sources.splice(0);
    for (const source of sources) {
      const tag = source.consumerTag;
      source.consumerTag = undefined;
      if (tag && !source.closed) await source.channel.cancel(tag).catch(() => undefined);
      this.retired.add(source);
    }
    // Deliveries not yet started go back to their queue for another instance, unflagged.
    const unstarted = this.waiting.splice(0);
    const failures = this.failures;
    if (failures) await Promise.all(unstarted.map(({ message, source }) => failures.giveBack(source, message, source.queue)));
    for (const source of sources) this.closeIfDone(source);
  }

  private closeIfDone(source: ConsumerSource): void {
    if (source.inFlight > 0 || !this.retired.has(source)) return;
    this.retired.delete(source);
    // Acknowledgements still gathered go out before the channel closes.
    source.flush();
    source.closed = true;
    source.channel.close().catch(() => undefined);
  }

  private whenIdle(graceMs: number): Promise<boolean> {
    if (this.inFlight === 0) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = Number.isFinite(graceMs) ? setTimeout(() => resolve(false), graceMs) : undefined;
      this.idle = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  private async consume(connection: AmqpConnection, queue: string, kind: ConsumerSource['kind'], prefetch: number): Promise<void> {
    const channel = await connection.createChannel();
    const source = new ConsumerSource(kind, queue, channel);
    this.sources.push(source);
    channel.on('error', (err: Error) => this.options.log.error('consumer channel error', { queue, err: err.message }));
    channel.on('close', () => {
      const expected = source.closed;
      source.abandon();
      if (!expected) this.onChannelLost(connection, queue);
    });
    await channel.prefetch(prefetch);
    const { consumerTag } = await channel.consume(queue, (message) => this.onDelivery(message, source), { noAck: false });
    source.consumerTag = consumerTag;
  }

  /**
   * A channel closed. If its connection is gone, the group re-attaches on the next one. If the
   * connection lives (channel error, deleted queue), the runner heals itself: re-declare,
   * re-open, consume again, a second later so that a persistent fault does not spin.
   */
  private onChannelLost(connection: AmqpConnection, what: string): void {
    if (this.stopping || this.connection !== connection) return;
    clearTimeout(this.healing);
    this.healing = setTimeout(() => {
      if (this.stopping || this.connection !== connection || !isOpen(connection)) return;
      this.options.log.warn('channel lost while connected; re-attaching', { queue: this.queue, channel: what });
      this.attach(connection).then(
        () => (this.healFailures = 0),
        (err: unknown) => {
          // A fault that survives a few tries while the broker answers (a queue declared
          // elsewhere with other arguments, a missing permission) will not heal by itself.
          if (++this.healFailures >= MAX_HEAL_ATTEMPTS) {
            this.options.log.error('re-attach keeps failing; giving up', { queue: this.queue, err: (err as Error).message });
            this.emit('fatal', err);
            return;
          }
          this.options.log.error('re-attach failed; retrying', { queue: this.queue, err: (err as Error).message });
          this.onChannelLost(connection, what);
        },
      );
    }, 1000);
  }

  private onDelivery(message: ConsumeMessage | null, source: ConsumerSource): void {
    if (message === null) {
      // The broker cancelled the consumer (its queue was deleted): declare it again and resume.
      this.options.log.warn('consumer cancelled by the broker', { queue: source.queue });
      source.consumerTag = undefined;
      source.abandon();
      const at = this.sources.indexOf(source);
      if (at >= 0) this.sources.splice(at, 1);
      this.retired.add(source);
      this.closeIfDone(source);
      if (this.connection) this.onChannelLost(this.connection, source.queue);
      return;
    }
    source.delivered(message);
    this.waiting.push({ message, source });
    this.pump();
  }

  private pump(): void {
    while (
      (this.current === 'running' || this.current === 'paused' || this.current === 'quiet') &&
      this.inFlight < this.settings.concurrency &&
      this.waiting.length > 0
    ) {
      const { message, source } = this.waiting.shift() as { message: ConsumeMessage; source: ConsumerSource };
      this.inFlight++;
      source.inFlight++;
      void this.process(message, source);
    }
  }

  /** Settles one delivery; never rejects. Frees its slot and starts the next delivery when done. */
  private async process(message: ConsumeMessage, source: ConsumerSource): Promise<void> {
    const failures = this.failures as FailureHandler;
    const meta = this.options.stage.metadata;
    let job: Job | undefined;
    let began = 0;
    this.metrics.consumed();
    try {
      const decoded = fromWire(message, this.options.config.tenantHeader);
      job = decoded.job;
      const tenant = this.options.tenant;
      if (tenant !== undefined && job.tenant !== tenant) {
        // The broker routed it here by its routing header; a body naming another tenant must
        // not carry that tenant's identity into this tenant's outputs.
        throw new InvalidPayloadError(
          `job names tenant "${job.tenant ?? '(none)'}" but arrived on ${this.queue}, the queue of "${tenant}"`,
          meta.input,
        );
      }
      if (meta.types && !meta.types.includes(job.type)) {
        throw new InvalidPayloadError(
          `stage "${meta.name}" does not handle job type "${job.type}" (handles ${meta.types.join(', ')})`,
          meta.input,
        );
      }
      if (isRedelivery(message)) {
        // Stagecoach never requeues a started job itself: a redelivered one was in the hands
        // of a process that died (exit, uncaught exception, OOM, SIGKILL) or lost its
        // connection. From the main queue that may be collateral (prefetched, never started):
        // the job moves to the suspect queue with its attempt counted. From the suspect queue,
        // where jobs run one at a time, the crash was its own: a job that kills every process
        // that takes it is dead-lettered as POISON once max_attempts is reached.
        this.stats.poisonRedeliveries++;
        if (source.kind === 'main') {
          await failures.suspect(source, message, job, this.suspectQueue);
          return;
        }
        throw new StagecoachError('POISON', `attempt ${job.attempt} killed the process handling it`);
      }
      began = performance.now();
      const current = job;
      const ctx = sdkRegistered()
        ? await inJobSpan(meta.name, this.queue, current, decoded.headers, () => this.runHandler(current, decoded.headers))
        : await this.runHandler(current, decoded.headers);
      const seconds = (performance.now() - began) / 1000;
      this.stats.emitted += await ctx.settle();
      source.ack(message);
      this.metrics.completed(seconds);
      this.metrics.acked();
      this.stats.completed++;
    } catch (err) {
      if (began > 0) this.metrics.failed((performance.now() - began) / 1000, toJobError(err).type);
      if (source.closed) {
        // Its channel is gone with the connection: the broker redelivers this job; settling it
        // here would act on a delivery tag of a dead channel.
        this.options.log.debug('delivery abandoned with its channel', { queue: source.queue, job_id: job?.id });
        return;
      }
      await failures.fail(source, message, job, err, source.queue);
    } finally {
      this.inFlight--;
      source.inFlight--;
      this.closeIfDone(source);
      if (this.inFlight === 0) this.idle?.();
      this.pump();
    }
  }

  private readonly onPublished = (output: string): void => this.metrics.published(output);

  private runHandler(job: Job, headers: Record<string, unknown>): Promise<JobContext> {
    const meta = this.options.stage.metadata;
    const ctx = new JobContext(
      meta.name,
      meta.outputs,
      job,
      headers,
      this.router as JobRouter,
      this.options.log,
      undefined,
      this.onPublished,
    );
    return invokeHandler(this.handler as StageHandler, job, ctx, job.timeout ?? this.input.default_timeout);
  }
}

/** Classic queues set `redelivered`; quorum queues also count in `x-delivery-count`. */
function isRedelivery(message: ConsumeMessage): boolean {
  const count = Number(message.properties.headers?.['x-delivery-count'] ?? 0);
  return message.fields.redelivered || count > 0;
}
