import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { ensureTopology } from '../broker/declare-topology.js';
import type { CompiledConfig, CompiledStageConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { createStageInstance } from '../stage/stage-container.js';
import type { StageHandler } from '../stage/stage.types.js';
import { createThreadedHandler, type ThreadedHandler } from '../stage/threads/threaded-handler.js';
import { suspectPart } from '../topology/build-topology.js';
import type { Topology } from '../topology/topology.types.js';
import { ChannelSupervisor } from './channels/channel-supervisor.js';
import { JobCancels } from './handling/job-cancels.js';
import { DirectiveGate } from './handling/directive-gate.js';
import type { DispatcherOptions } from './intake/dispatcher.js';
import { EventLoopWatch } from './event-loop-watch.js';
import { IsolationGate } from './intake/isolation-gate.js';
import { LossLedger } from './loss-ledger.js';
import { SuspectDeclaration } from './intake/suspect-declaration.js';
import type { StageRunnerOptions } from './runner-options.js';
import type { SuspectWatchOptions } from './intake/suspect-watch.js';
import type { WorkConsumersOptions } from './intake/work-consumers.js';

/** What the resources need of the runner they serve. */
export interface RunnerContext {
  settings: CompiledStageConfig;
  /** The runner's physical input queue. */
  queue: string;
  /** Its suspect companion. */
  suspectQueue: string;
  /** What it declares (or checks) at start and when healing. */
  topology: Topology;
  /** A channel of its own that cannot be healed fails the runner. */
  onFatal(err: Error): void;
}

/** Which resources this runner owns: attached, detached and closed by it, not by a group or pool. */
export interface Ownership {
  /** Its own isolation gate (a runner alone); a group's is joined and left, never closed. */
  gate: boolean;
  directives: boolean;
  /** Its own loss ledger, with its own event-loop watch. */
  ledger: boolean;
  /** Its own publisher channel (not pooled). */
  publishers: boolean;
  /** Its own handler: a stage instance, or threads (not a pool's shared handler). */
  handler: boolean;
}

/**
 * What a runner works with, own or shared, decided here once from its options: alone it owns
 * everything; in a group it shares the isolation gate, loss ledger and directive gate; pooled
 * (TenantPool) it also shares the publisher channel, a work and a suspect channel, the slots and
 * possibly the handler. The runner attaches, detaches and closes through this, so that it never
 * asks itself whether it is pooled: what is own is attached and closed here, and only that.
 *
 * Lifecycle: built with the runner; `attachDirectives` then `attachPublishers` at every attach,
 * `detach` when the connection is gone, `close` once at stop.
 */
export class RunnerResources {
  readonly owned: Ownership;
  readonly gate: IsolationGate;
  readonly directives: DirectiveGate;
  readonly ledger: LossLedger;
  readonly publishers: ChannelSupervisor<ConfirmPublisher>;
  /** WorkConsumers' options that depend on it: its prefetch, and pooled, the shared channel. */
  readonly work: Pick<WorkConsumersOptions, 'prefetch' | 'shared'>;
  readonly suspects: Pick<SuspectWatchOptions, 'shared' | 'checkMs' | 'mayBeMissing'>;
  /** Pooled with `suspectOnFirstUse`: its suspect part, declared before the first move there on each connection. */
  readonly suspectDeclaration: SuspectDeclaration | undefined;
  /** The dispatcher's slots: `concurrency` of its own, or a seat in the pool's share. */
  readonly slots: Pick<DispatcherOptions, 'concurrency' | 'share'>;
  /** Lines a pooled process of a thousand tenants would say a thousand times are debug there. */
  readonly notice: 'info' | 'debug';
  private readonly watch: EventLoopWatch | undefined;
  private built: StageHandler | undefined;

  constructor(
    private readonly options: StageRunnerOptions,
    private readonly context: RunnerContext,
  ) {
    const { config, log, pooled } = options;
    const { settings } = context;
    this.owned = {
      gate: options.gate === undefined,
      directives: options.directives === undefined,
      ledger: options.ledger === undefined,
      publishers: pooled === undefined,
      handler: pooled?.handler === undefined,
    };
    this.notice = pooled === undefined ? 'info' : 'debug';
    this.gate = options.gate ?? new IsolationGate({ log });
    this.directives = options.directives ?? new DirectiveGate(config.prefix, log);
    if (options.ledger === undefined) this.watch = new EventLoopWatch();
    this.ledger = options.ledger ?? new LossLedger(this.watch as EventLoopWatch, stallWindowMs(config));
    this.publishers =
      pooled?.publishers ??
      new ChannelSupervisor<ConfirmPublisher>({
        name: 'publisher',
        log,
        onFatal: context.onFatal,
        isOpen: (publisher) => publisher.isOpen,
        open: async (connection, lost, healing) => {
          if (healing) await ensureTopology(connection, config, context.topology, log);
          return ConfirmPublisher.open(connection, () => lost('publisher channel closed'), options.onQueueFull);
        },
        close: (publisher) => publisher.close(),
      });
    this.work = {
      prefetch: pooled?.prefetch ?? settings.prefetch,
      ...(pooled === undefined ? {} : { shared: { channel: pooled.work, probe: pooled.probe } }),
    };
    this.suspects = {
      ...(options.suspectCheckMs === undefined ? {} : { checkMs: options.suspectCheckMs }),
      ...(pooled === undefined ? {} : { shared: { channel: pooled.suspects, probe: pooled.probe } }),
      ...(pooled?.suspectOnFirstUse === true ? { mayBeMissing: true } : {}),
    };
    this.suspectDeclaration =
      pooled?.suspectOnFirstUse === true
        ? new SuspectDeclaration({ topology: suspectPart(config, context.topology), queue: context.suspectQueue, log })
        : undefined;
    this.slots = {
      concurrency: settings.concurrency,
      ...(pooled === undefined
        ? {}
        : {
            share: {
              pool: pooled.share,
              weight: pooled.weight,
              ...(pooled.maxConcurrency === undefined ? {} : { maxConcurrency: pooled.maxConcurrency }),
              ...(pooled.minConcurrency === undefined || pooled.minConcurrency === 0 ? {} : { minConcurrency: pooled.minConcurrency }),
            },
          }),
    };
  }

  /**
   * Builds the stage's handler, once: alone or in a group, its container (or its worker threads)
   * now; pooled, the pool's shared handler, or a stage instance built at the tenant's first job
   * (a thousand tenants must not cost a thousand containers up front).
   */
  async handler(): Promise<StageHandler> {
    if (this.built !== undefined) return this.built;
    const { config, stage, tenant, variant, log, pooled } = this.options;
    const threads = this.context.settings.threads;
    if (pooled !== undefined) {
      this.built = pooled.handler ?? lazyHandler(() => createStageInstance(stage, config, tenant, log, variant));
    } else {
      this.built = threads
        ? await createThreadedHandler({ stage, config, tenant, variant, threads, log })
        : await createStageInstance(stage, config, tenant, log, variant);
    }
    return this.built;
  }

  /**
   * Declares what the runner needs, or with broker-enforced tenants (no configure permission)
   * checks that `provision` did. Pooled with `redeclare: false`, only checks that its queue is
   * still there: a queue gone with its retired tenant must not come back.
   */
  async declare(connection: AmqpConnection): Promise<void> {
    const pooled = this.options.pooled;
    if (pooled?.redeclare === false) {
      const queue = this.context.queue;
      if ((await pooled.probe.messageCount(queue)) === undefined) {
        throw new StagecoachError('NOT_FOUND', `queue "${queue}" is gone (its tenant retired, or the queue deleted)`);
      }
      return;
    }
    await ensureTopology(connection, this.options.config, this.context.topology, this.options.log);
  }

  /** First at every attach: its own directive gate follows the new connection, and what it declares on first use. */
  attachDirectives(connection: AmqpConnection): void {
    this.suspectDeclaration?.attach(connection);
    if (this.owned.directives) this.directives.attach(connection, new JobCancels(connection, this.options.config, this.options.log));
  }

  /** At every attach, once the queue's state is known: its own publisher channel opens. */
  async attachPublishers(connection: AmqpConnection): Promise<void> {
    if (this.owned.publishers) await this.publishers.attach(connection);
  }

  /** The connection is gone: its own publisher channel is forgotten (the pool forgets a shared one). */
  detach(): void {
    this.suspectDeclaration?.detach();
    if (this.owned.publishers) this.publishers.detach();
  }

  /**
   * Closes what it owns, and only that, at stop, around the runner's consumer channels: the
   * publisher and the handler first (the jobs are done with them; a grace period that ran out
   * is not granted twice, so the threads end now); then `closeConsumers`; then the watch and
   * the directive gate (a consumer channel that closes records its losses in the ledger, which
   * asks the watch).
   * @param drained whether the jobs in flight finished within the grace period
   */
  async close(drained: boolean, closeConsumers: () => Promise<void>): Promise<void> {
    if (this.owned.publishers) await this.publishers.close();
    if (this.owned.handler) await (this.built as Partial<ThreadedHandler> | undefined)?.close?.(drained ? undefined : 0);
    await closeConsumers();
    this.watch?.close();
    if (this.owned.directives) await this.directives.close();
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
