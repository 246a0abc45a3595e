import { EventEmitter } from 'node:events';
import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
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
import { FailureHandler } from './failure-handler.js';
import { createThreadedHandler, type ThreadedHandler } from './threads/threaded-handler.js';
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
  /** Shared with other runners in `dev`; the runner opens its own channels on it. */
  connection: AmqpConnection;
  log: Logger;
}

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
 * Lifecycle: `start()` declares the topology the stage needs, builds the stage through its
 * container and starts consuming; `stop()` cancels the consumer, hands prefetched but unstarted
 * deliveries back to the broker, waits for the handlers in flight, and closes its channels.
 *
 * Invariant (at-least-once, seeds/004): a delivery is acknowledged only after every job its
 * handler emitted, or its dead letter, has been confirmed by the broker. If the process dies
 * before that, the broker redelivers it.
 *
 * Emits 'error' when its channel closes while it is running (the connection was lost).
 */
export class StageRunner extends EventEmitter {
  readonly name: string;
  readonly queue: string;
  readonly stats: StageRunnerStats = { completed: 0, emitted: 0, retried: 0, deadLettered: 0, discarded: 0, poisonRedeliveries: 0 };

  private readonly settings: CompiledStageConfig;
  private readonly input: ResolvedQueueConfig;
  private readonly suspectQueue: string;
  private readonly waiting: Array<{ message: ConsumeMessage; source: Source }> = [];
  private readonly sources: Source[] = [];
  private inFlight = 0;
  private stopping = false;
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
    const input = queueFor(config, meta.input, `stage "${meta.name}"`);
    this.input = input;
    if (input.scope === 'tenant' && tenant === undefined) {
      throw new ConfigError(config.source, `queues.${meta.input}`, `a tenant for stage "${meta.name}": its input is tenant-scoped (use --tenant)`);
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

  async start(): Promise<void> {
    const { config, stage, tenant, log } = this.options;
    const meta = stage.metadata;
    await declareTopology(config, stageTopology(config, meta, tenant), log);
    this.handler = this.settings.threads
      ? await createThreadedHandler({ stage, config, tenant, variant: this.options.variant, threads: this.settings.threads, log })
      : await createStageInstance(stage, config, tenant, log, this.options.variant);

    this.publisher = await ConfirmPublisher.open(this.options.connection);
    this.router = new JobRouter(config, this.publisher);
    this.failures = new FailureHandler({
      config,
      input: this.input,
      tenant,
      stage: meta.name,
      publisher: this.publisher,
      router: this.router,
      log,
      stats: this.stats,
    });
    // Consume and publish on separate channels: a consumer's flow never waits on confirms.
    await this.consume(this.queue, 'main', this.settings.prefetch);
    // Suspects run one at a time: when one kills the process, it is the only one in hand.
    await this.consume(this.suspectQueue, 'suspect', 1);
    log.info('stage consuming', { queue: this.queue, concurrency: this.settings.concurrency, prefetch: this.settings.prefetch });
  }

  /** Stops consuming, finishes the jobs in flight, closes the runner's channels. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const source of this.sources) {
      if (source.consumerTag) await source.channel.cancel(source.consumerTag).catch(() => undefined);
    }
    // Deliveries not yet started go back to their queue for another instance, unflagged.
    const unstarted = this.waiting.splice(0);
    await Promise.all(unstarted.map(({ message, source }) => (this.failures as FailureHandler).giveBack(source.channel, message, source.queue)));
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    await this.publisher?.close();
    await (this.handler as Partial<ThreadedHandler> | undefined)?.close?.();
    for (const source of this.sources) await source.channel.close().catch(() => undefined);
    this.options.log.info('stage stopped', { queue: this.queue, ...this.stats });
  }

  private async consume(queue: string, kind: Source['kind'], prefetch: number): Promise<void> {
    const channel = await this.options.connection.createChannel();
    const source: Source = { kind, queue, channel, consumerTag: undefined };
    this.sources.push(source);
    channel.on('error', (err: Error) => this.options.log.error('consumer channel error', { queue, err: err.message }));
    channel.on('close', () => {
      if (!this.stopping) this.emit('error', new Error(`consumer channel of ${queue} closed`));
    });
    await channel.prefetch(prefetch);
    const { consumerTag } = await channel.consume(queue, (message) => this.onDelivery(message, source), { noAck: false });
    source.consumerTag = consumerTag;
  }

  private onDelivery(message: ConsumeMessage | null, source: Source): void {
    if (message === null) {
      // The broker cancelled the consumer: the queue was deleted.
      this.emit('error', new Error(`queue ${source.queue} was deleted: the broker cancelled its consumer`));
      return;
    }
    this.waiting.push({ message, source });
    this.pump();
  }

  private pump(): void {
    while (!this.stopping && this.inFlight < this.settings.concurrency && this.waiting.length > 0) {
      const { message, source } = this.waiting.shift() as { message: ConsumeMessage; source: Source };
      this.inFlight++;
      void this.process(message, source).finally(() => {
        this.inFlight--;
        if (this.inFlight === 0) this.idle?.();
        this.pump();
      });
    }
  }

  private async process(message: ConsumeMessage, source: Source): Promise<void> {
    const { channel } = source;
    const failures = this.failures as FailureHandler;
    const meta = this.options.stage.metadata;
    let job: Job | undefined;
    try {
      const decoded = fromWire(message, this.options.config.tenantHeader);
      job = decoded.job;
      const tenant = this.options.tenant;
      if (tenant !== undefined && job.tenant !== tenant) {
        // The broker routed it here by its routing header; a body naming another tenant must
        // not carry that tenant's identity into this tenant's outputs.
        throw new InvalidPayloadError(`job names tenant "${job.tenant ?? '(none)'}" but arrived on ${this.queue}, the queue of "${tenant}"`, meta.input);
      }
      if (meta.types && !meta.types.includes(job.type)) {
        throw new InvalidPayloadError(`stage "${meta.name}" does not handle job type "${job.type}" (handles ${meta.types.join(', ')})`, meta.input);
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
          await failures.suspect(channel, message, job, this.suspectQueue);
          return;
        }
        throw new StagecoachError('POISON', `attempt ${job.attempt} killed the process handling it`);
      }
      const ctx = await this.runHandler(job, decoded.headers);
      this.stats.emitted += await ctx.settle();
      channel.ack(message);
      this.stats.completed++;
    } catch (err) {
      await failures.fail(channel, message, job, err, source.queue);
    }
  }

  /** Runs `handle()`, aborting it through `ctx.signal` when it outlives its timeout. */
  private async runHandler(job: Job, headers: Record<string, unknown>): Promise<JobContext> {
    const meta = this.options.stage.metadata;
    const timeoutSeconds = job.timeout ?? this.input.default_timeout;
    const controller = new AbortController();
    const ctx = new JobContext(meta.name, meta.outputs, job, headers, this.router as JobRouter, this.options.log, controller.signal);
    const handled = Promise.resolve().then(() => (this.handler as StageHandler).handle(job, ctx));
    if (timeoutSeconds === undefined) {
      await handled;
      return ctx;
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new StagecoachError('HANDLER_TIMEOUT', `handler ran past its timeout of ${timeoutSeconds} s`);
        ctx.close();
        controller.abort(error);
        reject(error);
      }, timeoutSeconds * 1000);
    });
    // A handler that ignores the signal keeps running; its late result is dropped, not unhandled.
    handled.catch(() => undefined);
    try {
      await Promise.race([handled, timedOut]);
    } finally {
      clearTimeout(timer);
    }
    return ctx;
  }
}

/** A queue the runner consumes: its input, or the input's suspect queue. */
interface Source {
  kind: 'main' | 'suspect';
  queue: string;
  channel: Channel;
  consumerTag: string | undefined;
}

/** Classic queues set `redelivered`; quorum queues also count in `x-delivery-count`. */
function isRedelivery(message: ConsumeMessage): boolean {
  const count = Number(message.properties.headers?.['x-delivery-count'] ?? 0);
  return message.fields.redelivered || count > 0;
}
