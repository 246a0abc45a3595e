import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { StageMetrics } from '../observability/stage-metrics.js';
import type { PayloadOffloader } from '../payload/payload-offloader.js';
import type { Middleware } from '../stage/middleware/middleware.types.js';
import type { LoadedStage } from '../stage/stage-loader.js';
import type { PooledThreadedHandler } from '../stage/threads/threaded-handler.js';
import { readinessOf, type Readiness } from './process/group-readiness.js';
import { pooledThreads } from './process/pooled-threads.js';
import { devGroupPlans } from './process/stage-instance.js';
import { StageGroup, type StageProvisioning } from './stage-group.js';

export interface DevProcessOptions {
  /** Shared by every group (and a health server); a new registry by default. */
  metrics?: StageMetrics;
  /** See StageGroupOptions.payloads. */
  payloads?: PayloadOffloader | false;
  /** See StageGroupOptions.middleware: for every group. */
  middleware?: Middleware;
}

/**
 * What `stagecoach dev` runs: every stage for every configured tenant in one process, as
 * {@link StageGroup}s planned by {@link devGroupPlans}: the shared stages in one group, each
 * tenant-scoped stage (and variant) in a pooled group of every tenant. Connections and channels
 * therefore grow with the stages, not the tenants: a thousand tenants of one stage are one
 * connection and about a dozen channels.
 *
 * Each group keeps its own connection, reconnection, isolation gate and control queue; the
 * metrics are one registry. One group provisions (declares the topology of every stage for every
 * tenant, on each of its connections, and applies the queue settings once) before the others
 * start.
 *
 * Lifecycle as a StageGroup's: `start()`, then `stop()`; `terminated` once a `terminate` control
 * message stopped every group, `failed` when any group fails.
 */
export class DevProcess {
  readonly metrics: StageMetrics;
  readonly failed: Promise<Error>;
  readonly terminated: Promise<void>;
  /** Built by `start()`, the provisioning one first. */
  readonly groups: StageGroup[] = [];
  private readonly threads: PooledThreadedHandler[] = [];
  private stopping: Promise<boolean> | undefined;
  private fail!: (err: Error) => void;
  private terminate!: () => void;

  constructor(
    private readonly config: CompiledConfig,
    private readonly stages: readonly LoadedStage[],
    private readonly log: Logger,
    private readonly options: DevProcessOptions = {},
  ) {
    this.metrics = options.metrics ?? new StageMetrics({ log });
    this.failed = new Promise<Error>((resolve) => (this.fail = resolve));
    this.terminated = new Promise<void>((resolve) => (this.terminate = resolve));
  }

  /** `gracePeriod` (seconds): what `stop()` takes at most. */
  get gracePeriod(): number {
    return this.config.gracePeriod;
  }

  /** The broker node of the first group connected (every group connects to one of `broker.urls`). */
  get node(): string | undefined {
    return this.groups.find((group) => group.node !== undefined)?.node;
  }

  /** Tenants served (by the pooled groups). */
  get tenants(): string[] {
    return [...new Set(this.groups.flatMap((group) => group.tenants))];
  }

  /**
   * Builds the groups (and the worker threads of pooled stages with `threads`), starts the first
   * with `provision`, then the others together.
   * @param provision what the first group provisions: its topology covers every stage of the process
   */
  async start(provision: boolean | StageProvisioning = false): Promise<void> {
    const { config, log, options } = this;
    const plans = devGroupPlans(config, this.stages);
    for (const plan of plans) {
      const pooled = plan.pooled;
      const threads = pooled === undefined ? undefined : await pooledThreads(config, pooled.stage, pooled.variant, log);
      if (this.stopping !== undefined) {
        // Stopped while the threads started: stop() has closed the others already.
        await threads?.close();
        return;
      }
      if (threads !== undefined) this.threads.push(threads);
      this.groups.push(
        // A pooled group's own lines (`tenants consuming`) say which stage and variant they are of.
        new StageGroup(
          config,
          plan.instances,
          pooled === undefined
            ? log
            : log.child({ stage: pooled.stage.metadata.name, ...(pooled.variant === undefined ? {} : { variant: pooled.variant }) }),
          {
            metrics: this.metrics,
            ...(options.payloads === undefined ? {} : { payloads: options.payloads }),
            ...(options.middleware === undefined ? {} : { middleware: options.middleware }),
            ...(pooled === undefined ? {} : { pooled: { ...pooled, ...(threads === undefined ? {} : { threads }) } }),
          },
        ),
      );
    }
    for (const group of this.groups) void group.failed.then((err) => this.fail(err));
    void Promise.all(this.groups.map((group) => group.terminated)).then(() => this.terminate());
    const [first, ...rest] = this.groups;
    if (first === undefined) return;
    // The provisioning's own stages (devProvisioning names them), else every stage of the process.
    const stages = (typeof provision === 'object' ? provision.stages : undefined) ?? this.stages.map((stage) => stage.metadata);
    const beforeAttach = typeof provision === 'object' ? provision.beforeAttach.bind(provision) : () => Promise.resolve();
    await first.start(provision === false ? false : { beforeAttach, stages });
    await Promise.all(rest.map((group) => group.start()));
    log.info('dev groups running', { groups: this.groups.length, tenants: config.tenants.length });
  }

  /** Ready when every group is; else the first group's reason. */
  readiness(): Readiness {
    if (this.groups.length === 0) return readinessOf(false, false, []);
    const answers = this.groups.map((group) => group.readiness());
    const blocked = answers.find((answer) => answer.blocked !== undefined)?.blocked;
    const unready = answers.find((answer) => !answer.ready);
    return { ...(unready ?? { ready: true }), ...(blocked === undefined ? {} : { blocked }) };
  }

  /**
   * Stops every group together (each drains its runners within `graceMs`), then the pooled
   * worker threads. A second call gets the first's result.
   * @returns false when the grace period ran out for some group.
   */
  stop(graceMs = this.config.gracePeriod * 1000): Promise<boolean> {
    this.stopping ??= (async () => {
      const drained = await Promise.all(this.groups.map((group) => group.stop(graceMs)));
      await Promise.all(this.threads.map((threads) => threads.close()));
      return drained.every(Boolean);
    })();
    return this.stopping;
  }
}
