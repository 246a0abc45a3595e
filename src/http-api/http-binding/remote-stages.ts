import { openConnection, type AmqpConnection } from '../../broker/amqp-connection.js';
import { declareTopology } from '../../broker/declare-topology.js';
import type { CompiledConfig, CompiledStageConfig } from '../../config/config.types.js';
import { ControlListener } from '../../control/control-listener.js';
import { applyDeclaredQueueSettings } from '../../plan/declared-queue-settings.js';
import type { ControlMessage } from '../../control/control-protocol.js';
import { queueFor } from '../../config/queue-resolver.js';
import { TenantRequiredError, StagecoachError } from '../../errors/errors.js';
import type { Job } from '../../job/job.types.js';
import type { Logger } from '../../logging/logger.js';
import { payloadOffloaderFor, type PayloadOffloader } from '../../payload/payload-offloader.js';
import type { SettlementInterceptor } from '../../runner/settle/settlement-interceptor.js';
import type { EventSink } from '../../events/job-events.js';
import { StageRunner } from '../../runner/stage-runner.js';
import { DirectiveGate } from '../../runner/handling/directive-gate.js';
import { FlowControl } from '../../flow/flow-control.js';
import { JobCancels } from '../../runner/handling/job-cancels.js';
import type { LoadedStage } from '../../stage/stage-loader.js';
import type { StageContext, StageMetadata } from '../../stage/stage.types.js';
import { stageTopology } from '../../topology/build-topology.js';
import { BrokerNames } from '../../topology/names.js';
import { ApiError } from '../api-error.js';
import type { ClaimBoard } from './claim-board.js';

/** Most jobs one server holds for the HTTP workers of one queue (and tenant) at once: its prefetch. */
export const REMOTE_CONCURRENCY = 64;
/** How long after its start a runner is taken to be receiving its first deliveries. */
const STARTING_MS = 1000;

/** A queue (and tenant) served to HTTP workers: its key on the claim board and its runner. */
export interface RemoteQueue {
  key: string;
  queue: string;
  tenant?: string;
  runner: StageRunner;
  /** Date.now() when it started consuming. */
  startedAt: number;
  /** Whether a job of this runner reached the board: its first deliveries have come. */
  held(): boolean;
}

/**
 * The remote stages of one server: for each queue an HTTP worker fetches from (per tenant for a
 * tenant-scoped queue), a StageRunner whose stage is a worker over HTTP (StageMetadata.remote).
 * Its handler holds each job on the ClaimBoard until a worker claims and settles it, so every
 * outcome goes through the runner's settlement: emits confirmed before the ack, retries on the
 * ladder, dead letters with origin, suspects after a crash, tracking, flow limits' admission.
 * A push only declares its queue's topology (a job no queue takes would be unroutable); the
 * runner starts with the first fetch, so that a queue native stages serve is never consumed by
 * the binding unless a worker asks for it.
 */
export class RemoteStages {
  private connection: Promise<Opened> | undefined;
  private readonly running = new Map<string, Promise<RemoteQueue>>();
  /** Queues whose runner is being looked for or started (begin()). */
  private readonly starting = new Map<string, Promise<RemoteQueue | undefined>>();
  private readonly declared = new Map<string, Promise<void>>();
  /** Logical queues whose settings (policies) this server put before it first declared them. */
  private readonly settings = new Map<string, Promise<void>>();
  /** Per tenant, the unconfigured queues its token made this server declare or serve (bounded by queuesPerTenant). */
  private readonly implicit = new Map<string, Set<string>>();

  constructor(
    private readonly loadConfig: () => Promise<CompiledConfig>,
    private readonly board: ClaimBoard,
    private readonly log: Logger,
    private readonly interceptors: readonly SettlementInterceptor[] = [],
    /** Where the runners publish the `job.*` events of queues with `events: true`. */
    private readonly events?: EventSink,
    /** Unconfigured queues one tenant's token may make this server hold (AdminServerLimits.queuesPerTenant). */
    private readonly queuesPerTenant = Number.POSITIVE_INFINITY,
  ) {}

  /**
   * Counts an unconfigured queue against the bound of the tenant whose token asks for it
   * (`bounded`; undefined for the admin, who is not bounded). A configured queue is free.
   * @throws ApiError 429 `TENANT_LIMIT_EXCEEDED` past the bound: nothing is declared or started.
   */
  private admit(config: CompiledConfig, queue: string, bounded: string | undefined): void {
    if (bounded === undefined || config.queues.has(queue)) return;
    let queues = this.implicit.get(bounded);
    if (queues?.has(queue) === true) return;
    if ((queues?.size ?? 0) >= this.queuesPerTenant) {
      throw new ApiError(
        429,
        'TENANT_LIMIT_EXCEEDED',
        `tenant "${bounded}" has ${this.queuesPerTenant} queues here that no configuration names; configure "${queue}" (queues.${queue}) or use one of them`,
      );
    }
    if (queues === undefined) this.implicit.set(bounded, (queues = new Set()));
    queues.add(queue);
  }

  /** The tenant a queue is served for: a tenant-scoped queue needs one, a shared queue takes none. */
  tenantFor(config: CompiledConfig, queue: string, tenant: string | undefined, confined = false): string | undefined {
    const scope = queueFor(config, queue, 'the HTTP binding').scope;
    // A shared queue holds every tenant's jobs: its workers need the admin token.
    if (scope === 'shared' && confined) {
      throw new ApiError(403, 'UNAUTHORIZED', `queue "${queue}" is shared by every tenant: its workers need the admin token`);
    }
    if (scope === 'tenant' && tenant === undefined) throw new TenantRequiredError(queue);
    return scope === 'tenant' ? tenant : undefined;
  }

  /**
   * Declares what a queue needs to take pushed jobs, once per server.
   * @param bounded the tenant whose token pushes (admit): undefined for the admin.
   */
  async declare(queue: string, tenant: string | undefined, bounded?: string): Promise<void> {
    const key = keyOf(queue, tenant);
    let declared = this.declared.get(key);
    if (declared !== undefined) return declared;
    const { config } = await this.open();
    this.admit(config, queue, bounded);
    // A push of the same queue may have begun it while this one waited for the connection.
    declared = this.declared.get(key);
    if (declared !== undefined) return declared;
    declared = (async () => {
      const { connection } = await this.open();
      await this.applySettings(config, queue);
      await declareTopology(connection, stageTopology(config, metadataOf(config, queue), tenant), this.log);
    })();
    this.declared.set(key, declared);
    declared.catch(() => this.declared.delete(key));
    return declared;
  }

  /**
   * The runner of a queue (and tenant), started on first use; undefined, with nothing declared,
   * for a queue that no configuration names and that does not exist on the broker (a fetch
   * creates no queue: a push does).
   * @param bounded the tenant whose token fetches (admit): undefined for the admin.
   */
  async serve(queue: string, tenant: string | undefined, bounded?: string): Promise<RemoteQueue | undefined> {
    const key = keyOf(queue, tenant);
    const remote = await (this.running.get(key) ?? this.starting.get(key) ?? this.begin(key, queue, tenant, bounded));
    if (remote === undefined) return undefined;
    // A paused queue is read again at each fetch: a resume whose control message is still on its
    // way (the answer to the resume came first) already counts. Only while paused: costs nothing else.
    if (remote.runner.state === 'paused') {
      await remote.runner.syncState((await this.open()).connection);
      this.board.setPaused(remote.key, remote.runner.state === 'paused');
    }
    return remote;
  }

  /**
   * Looks whether the queue is served here and starts its runner. Fetches that come while it looks
   * share it: each starting a runner of its own would consume the queue once per fetch, on one line.
   */
  private begin(key: string, queue: string, tenant: string | undefined, bounded: string | undefined): Promise<RemoteQueue | undefined> {
    const begun = (async (): Promise<RemoteQueue | undefined> => {
      const { config } = await this.open();
      if (
        !config.queues.has(queue) &&
        !this.declared.has(key) &&
        !(await this.exists(new BrokerNames(config.prefix).queue(queue, tenant)))
      ) {
        return undefined;
      }
      this.admit(config, queue, bounded);
      const running = this.start(key, queue, tenant);
      this.running.set(key, running);
      running.catch(() => this.running.delete(key));
      return running;
    })().finally(() => this.starting.delete(key));
    this.starting.set(key, begun);
    return begun;
  }

  /**
   * Whether jobs are on their way to one of these runners' lines on the board: the runner started
   * a moment ago and none of its jobs reached the board yet (its first deliveries are coming; once
   * one came, the rest came with it or the broker counts them ready: a job waiting for its flow
   * limit's token is not coming, and a fetch does not wait for it), it has jobs in hand that are not on the board
   * yet (admitted, loading their payload), or the broker has some ready in its main or due queue
   * for a runner with room (fewer than REMOTE_CONCURRENCY in hand).
   */
  async readyFor(served: readonly RemoteQueue[]): Promise<boolean> {
    for (const { key, runner, startedAt, held } of served) {
      if (runner.state === 'paused') continue;
      if ((Date.now() - startedAt < STARTING_MS && !held()) || runner.inFlight > this.board.heldOn(key)) return true;
    }
    const { connection, config } = await this.open();
    const names = new BrokerNames(config.prefix);
    const channel = await connection.createChannel();
    try {
      for (const { queue, tenant, runner } of served) {
        if (runner.inFlight >= REMOTE_CONCURRENCY || runner.state === 'paused') continue;
        for (const physical of [names.queue(queue, tenant), names.dueQueue(queue, tenant)]) {
          if ((await channel.checkQueue(physical)).messageCount > 0) return true;
        }
      }
      return false;
    } finally {
      await channel.close().catch(() => undefined);
    }
  }

  /**
   * Forgets what its runners know of a batch's directives: the next job of it asks the broker
   * (a workflow cancelled here, docs/workflows.md). Its runners share one gate.
   */
  forget(batch: string): void {
    void this.connection?.then((opened) => opened.directives.forget({ batch })).catch(() => undefined);
  }

  /** The queue's settings, put once per server before it declares the queue (declared-queue-settings.ts). */
  private applySettings(config: CompiledConfig, queue: string): Promise<void> {
    let settings = this.settings.get(queue);
    if (settings === undefined) {
      settings = applyDeclaredQueueSettings(config, [metadataOf(config, queue)], [queue], this.log);
      this.settings.set(queue, settings);
    }
    return settings;
  }

  /** Whether a queue exists on the broker (a passive declare, on a channel of its own: a miss closes it). */
  private async exists(physical: string): Promise<boolean> {
    const { connection } = await this.open();
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    try {
      await channel.checkQueue(physical);
      return true;
    } catch {
      return false;
    } finally {
      await channel.close().catch(() => undefined);
    }
  }

  /** Hands every held job back and stops every runner (test reset, shutdown). */
  async stopAll(): Promise<void> {
    const runners = await Promise.allSettled([...this.running.values()]);
    this.running.clear();
    this.declared.clear();
    this.settings.clear();
    this.implicit.clear();
    this.board.releaseAll();
    for (const result of runners) if (result.status === 'fulfilled') await result.value.runner.stop(5000);
  }

  async close(): Promise<void> {
    await this.stopAll();
    const opened = await this.connection?.catch(() => undefined);
    this.connection = undefined;
    await opened?.control.close();
    await opened?.payloads.store.close();
    await opened?.directives.close();
    await opened?.flow.close();
    await opened?.connection.close().catch(() => undefined);
  }

  private async start(key: string, queue: string, tenant: string | undefined): Promise<RemoteQueue> {
    const { connection, config, payloads, directives, flow } = await this.open();
    const metadata = metadataOf(config, queue);
    await this.applySettings(config, queue);
    const board = this.board;
    // Claims come after the start (the runner exists by then): each is the job's `started` report.
    const onClaim = (job: Job): void => runner.started(job);
    let held = false;
    // One class per queue: the container builds it like any stage; its handler is the claim board.
    class RemoteWorkerStage {
      handle(job: Job, ctx: StageContext): Promise<unknown> {
        held = true;
        return board.hold(key, job, ctx, onClaim);
      }
    }
    const stage: LoadedStage = { metadata, target: RemoteWorkerStage, modules: [], middleware: { enqueue: [], execution: [] } };
    const runner = new StageRunner({
      config: withRemoteStage(config, metadata),
      stage,
      ...(tenant === undefined ? {} : { tenant }),
      log: this.log,
      payloads,
      directives,
      flow,
      interceptors: this.interceptors,
      ...(this.events === undefined ? {} : { events: this.events }),
    });
    runner.on('fatal', (err: Error) => {
      this.log.error('a remote stage lost its channels; its next fetch starts it again', { queue, tenant, err: err.message });
      this.running.delete(key);
    });
    await runner.start(connection);
    // Started paused (its state was read at attach): the board holds its jobs until a resume.
    board.setPaused(key, runner.state === 'paused');
    this.log.info('serving a queue to HTTP workers', { queue, tenant, stage: metadata.name, state: runner.state });
    return { key, queue, ...(tenant === undefined ? {} : { tenant }), runner, startedAt: Date.now(), held: () => held };
  }

  /**
   * A control message (src/control/control-protocol.ts): queue states are read again from the
   * broker by the runners it addresses; directives are forgotten, to be read again. Worker states
   * (`quiet`, `terminate`) are the HTTP workers' own (worker-directory.ts): the runners ignore them.
   */
  private async onControl(message: ControlMessage, connection: AmqpConnection, directives: DirectiveGate): Promise<void> {
    if (message.command === 'directive') {
      directives.forget({
        ...(message.batch === undefined ? {} : { batch: message.batch }),
        ...(message.tenant === undefined ? {} : { tenant: message.tenant }),
      });
    } else if (message.command === 'pause' || message.command === 'resume' || message.command === 'drain') {
      await this.syncStates(connection, (runner) => runner.matches(message));
    }
  }

  /** The runners `which` selects read their queue's state again; the board follows. */
  private async syncStates(connection: AmqpConnection, which: (runner: StageRunner) => boolean): Promise<void> {
    const served = await Promise.allSettled([...this.running.values()]);
    for (const result of served) {
      if (result.status !== 'fulfilled') continue;
      const { key, runner } = result.value;
      if (runner.stopping || !which(runner)) continue;
      await runner.syncState(connection);
      this.board.setPaused(key, runner.state === 'paused');
    }
  }

  private open(): Promise<Opened> {
    this.connection ??= (async () => {
      const config = await this.loadConfig();
      const connection = await openConnection(config, this.log, 'stagecoach-http-workers', 0, 'turn');
      // The queues' and the jobs' own limits (a push's `options.rate_limit`), as native stages take them.
      const flow = new FlowControl(config, this.log);
      connection.on('close', () => {
        void flow.close();
        // Every delivery held is back with the broker: the next fetch opens anew.
        this.log.warn("the HTTP workers' broker connection closed; held jobs go back to their queues");
        this.connection = undefined;
        this.running.clear();
        this.declared.clear();
        this.board.releaseAll();
      });
      const directives = new DirectiveGate(config.prefix, this.log);
      directives.attach(connection, new JobCancels(connection, config, this.log));
      // Queue states and directives change while runners serve: told on <prefix>.control, as native stages are.
      const control = new ControlListener(
        config,
        this.log,
        (message) => this.onControl(message, connection, directives),
        () => this.syncStates(connection, () => true),
      );
      await control.attach(connection);
      await flow.attach(connection);
      return { connection, config, payloads: payloadOffloaderFor(config, this.log), directives, control, flow };
    })();
    this.connection.catch(() => (this.connection = undefined));
    return this.connection;
  }
}

/** The server's connection for HTTP workers and what its runners share on it. */
interface Opened {
  connection: AmqpConnection;
  config: CompiledConfig;
  payloads: PayloadOffloader;
  /** Batch and tenant directives and job cancels, for every runner (see forget). */
  directives: DirectiveGate;
  /** Queue states and directives changed elsewhere (onControl). */
  control: ControlListener;
  /** The tokens of the limits its runners' jobs take (docs/flow-control.md). */
  flow: FlowControl;
}

export function keyOf(queue: string, tenant: string | undefined): string {
  return tenant === undefined ? queue : `${queue}/${tenant}`;
}

/** The remote stage of a queue: it may emit to every configured queue (a remote worker's ack names its outputs). */
function metadataOf(config: CompiledConfig, queue: string): StageMetadata {
  const outputs = [...config.queues.keys()].filter((name) => name !== '_default' && name !== queue);
  return { name: `http-${queue}`.slice(0, 63), input: queue, outputs, remote: true };
}

/** The configuration with the remote stage's settings: prefetch and concurrency REMOTE_CONCURRENCY, no threads, no limits of its own. */
function withRemoteStage(config: CompiledConfig, metadata: StageMetadata): CompiledConfig {
  if (config.stages.has(metadata.name) && config.stages.get(metadata.name)?.module !== '<http-binding>') {
    throw new StagecoachError(
      'INVALID_CONFIG',
      `stage "${metadata.name}" is configured: the HTTP binding names its remote stage of queue "${metadata.input}" so`,
    );
  }
  const settings: CompiledStageConfig = {
    name: metadata.name,
    module: '<http-binding>',
    concurrency: REMOTE_CONCURRENCY,
    prefetch: REMOTE_CONCURRENCY,
    tenantPrefetch: REMOTE_CONCURRENCY,
    options: {},
    threads: undefined,
    limits: [],
  };
  return { ...config, stages: new Map([...config.stages, [metadata.name, settings]]) };
}
