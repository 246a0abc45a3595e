/**
 * `stages.<name>.threads: N`: the stage's handler runs in a pool of N worker threads, so that a
 * CPU-bound handler never blocks the main thread's event loop, where the AMQP connection lives
 * (a blocked loop misses heartbeats and the broker drops the connection).
 *
 * The main thread keeps everything that touches the broker: the runner consumes, the pool hands
 * each job to an idle thread (first come, first served when all are busy: `threads` may be
 * lower than `concurrency`), the thread's emits come back to the delivery's real context, and
 * the runner acknowledges once they are confirmed. What the handler throws is rebuilt on this
 * side as the class the failure logic knows (`error-transfer.ts`).
 *
 * Lifecycle: `createThreadedHandler()` resolves once every thread has built its stage instance
 * and rejects with the first start-up error (a module that does not load). A thread that dies
 * fails the job it ran with `ThreadCrashError` and is replaced. `close()` lets running jobs
 * finish (up to the configuration's `gracePeriod`), then terminates the threads.
 *
 * A pooled process serves one stage for many tenants, too many for a pool each:
 * `createPooledThreadedHandler()` makes one pool for all of them. Its threads only load the
 * stage module at start (so a broken module still fails creation); each builds a tenant's
 * instance, in a container of its own, the first time it runs a job of that tenant (the job's
 * `ctx.tenant`), and keeps it until `release(tenant)`. Everything else is the same pool: a
 * replaced thread starts empty and builds again as jobs come.
 */
import type { CompiledConfig } from '../../config/config.types.js';
import { StagecoachError } from '../../errors/errors.js';
import type { Job } from '../../job/job.types.js';
import type { Logger } from '../../logging/logger.js';
import type { LoadedStage } from '../stage-loader.js';
import { canAbort } from '../never-aborted.js';
import type { StageContext, StageHandler } from '../stage.types.js';
import type { StageWorkerData } from './protocol.js';
import { StageThread } from './stage-thread.js';

export { ThreadCrashError } from './stage-thread.js';

export interface ThreadedHandlerOptions {
  stage: LoadedStage;
  config: CompiledConfig;
  tenant: string | undefined;
  variant: string | undefined;
  threads: number;
  log: Logger;
  /**
   * How long a job whose `ctx.signal` was aborted may run on before its thread is terminated and
   * replaced. @defaultValue 5000 ms
   */
  abortGraceMs?: number;
}

export interface ThreadedHandler extends StageHandler {
  /** Runs the job on an idle thread, or once one is free (first come, first served); resolves with what the handler returned. */
  handle(job: Job, ctx: StageContext): Promise<unknown>;
  /**
   * Ends the worker threads after the jobs they run have settled, waiting at most `graceMs`
   * (default: the configuration's `gracePeriod`); 0 terminates them at once.
   */
  close(graceMs?: number): Promise<void>;
}

/** The options of a pool that serves many tenants: those of one tenant's pool, without the tenant. */
export type PooledThreadedHandlerOptions = Omit<ThreadedHandlerOptions, 'tenant'>;

export interface PooledThreadedHandler extends ThreadedHandler {
  /**
   * Runs the job on an idle thread, with that thread's instance of the job's tenant
   * (`ctx.tenant`, which the runner has checked against the queue the job came from), built
   * there first if the thread has none yet. A job without a tenant gets an instance of its own,
   * built with `TENANT` undefined.
   */
  handle(job: Job, ctx: StageContext): Promise<unknown>;
  /**
   * Drops the tenant's instances in every thread, disposing of their containers (a job still
   * running on one keeps it until it settles). Resolves once every thread has done so (a
   * thread that dies meanwhile counts as done); never rejects. A later job of the tenant builds
   * a new instance.
   */
  release(tenant: string): Promise<void>;
  /**
   * A handler for one tenant's jobs on this pool, for a runner that takes one handler per
   * tenant: it runs jobs of that tenant only (another `ctx.tenant` is refused), and has no
   * `close()`, so that stopping one tenant's runner, which closes a handler that has one,
   * cannot end the pool the other tenants share.
   */
  forTenant(tenant: string): Pick<ThreadedHandler, 'handle'>;
}

const DEFAULT_ABORT_GRACE_MS = 5000;

export async function createThreadedHandler(options: ThreadedHandlerOptions): Promise<ThreadedHandler> {
  const pool = new ThreadPool({ ...options, perTenant: false });
  await pool.start();
  return pool;
}

/**
 * One pool of `threads` worker threads for every tenant of a stage. Resolves once every thread
 * has loaded the stage module; rejects with the first start-up error.
 */
export async function createPooledThreadedHandler(options: PooledThreadedHandlerOptions): Promise<PooledThreadedHandler> {
  const pool = new ThreadPool({ ...options, tenant: undefined, perTenant: true });
  await pool.start();
  return pool;
}

interface PoolOptions extends ThreadedHandlerOptions {
  perTenant: boolean;
}

interface Task {
  job: Job;
  ctx: StageContext;
  resolve: (result: unknown) => void;
  reject: (err: unknown) => void;
}

/** The tasks waiting for a thread under one signal, and the one abort listener they share. */
interface Waiters {
  tasks: Set<Task>;
  onAbort: () => void;
}

class ThreadPool implements PooledThreadedHandler {
  private readonly threads = new Set<StageThread>();
  private readonly idle: StageThread[] = [];
  private readonly queue: Task[] = [];
  /**
   * Invariant: a signal has an abort listener from this pool exactly while some task under it
   * waits in `queue`, and only one, however many wait. Jobs without a timeout all share one
   * never-aborted signal: a listener per job would pile up on it for ever.
   */
  private readonly waiters = new Map<AbortSignal, Waiters>();
  private readonly running = new Set<Promise<void>>();
  private readonly data: StageWorkerData;
  private starting = 0;
  private nextIndex = 0;
  /** False until every first thread is up: only then are dead threads replaced. */
  private started = false;
  private closing = false;

  constructor(private readonly options: PoolOptions) {
    const { config, stage, tenant, variant, log, perTenant } = options;
    this.data = {
      config,
      stage: stage.metadata.name,
      perTenant,
      tenant,
      variant,
      logLevel: log.level,
      logFields: { ...primitives(log.defaultMeta), stage: stage.metadata.name, ...primitives({ tenant, variant }) },
    };
  }

  async start(): Promise<void> {
    const results = await Promise.allSettled(Array.from({ length: this.options.threads }, () => this.spawn()));
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) {
      this.closing = true;
      await Promise.all([...this.threads].map((thread) => thread.terminate()));
      throw failed.reason;
    }
    this.started = true;
    this.options.log.info('stage threads started', { threads: this.options.threads, per_tenant: this.options.perTenant });
  }

  handle(job: Job, ctx: StageContext): Promise<unknown> {
    if (this.closing) return Promise.reject(new StagecoachError('INVALID_REQUEST', `the threads of stage "${ctx.stage}" are closed`));
    // A job whose time runs out while it waits for a thread never starts.
    if (ctx.signal.aborted) return Promise.reject(ctx.signal.reason as Error);
    return new Promise<unknown>((resolve, reject) => {
      this.enqueue({ job, ctx, resolve, reject });
      this.replenish();
      this.dispatch();
    });
  }

  forTenant(tenant: string): Pick<ThreadedHandler, 'handle'> {
    return {
      handle: (job, ctx) =>
        ctx.tenant === tenant
          ? this.handle(job, ctx)
          : Promise.reject(
              new StagecoachError('INVALID_REQUEST', `a job of tenant "${ctx.tenant ?? '(none)'}" handed to the handler of "${tenant}"`),
            ),
    };
  }

  async release(tenant: string): Promise<void> {
    // A thread still starting holds no instance: threads of this pool build them on demand.
    await Promise.all([...this.threads].map((thread) => thread.release(tenant)));
  }

  async close(graceMs = this.options.config.gracePeriod * 1000): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const task of this.dequeueAll()) task.reject(new StagecoachError('INVALID_REQUEST', 'the stage closed before the job started'));
    if (this.running.size > 0 && graceMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
      await Promise.race([Promise.allSettled([...this.running]), grace]);
      clearTimeout(timer);
    }
    await Promise.all([...this.threads].map((thread) => thread.terminate()));
  }

  private dispatch(): void {
    while (this.idle.length > 0 && this.queue.length > 0) {
      const thread = this.idle.shift() as StageThread;
      const task = this.queue.shift() as Task;
      // From here the thread forwards an abort to the running job (`StageThread.run`).
      this.detach(task);
      const run = thread
        .run(task.job, task.ctx)
        .then(task.resolve, task.reject)
        .finally(() => {
          this.running.delete(run);
          if (thread.alive && !this.closing) this.idle.push(thread);
          this.dispatch();
        });
      this.running.add(run);
    }
  }

  private enqueue(task: Task): void {
    this.queue.push(task);
    const signal = task.ctx.signal;
    if (!canAbort(signal)) return;
    const waiters = this.waiters.get(signal);
    if (waiters) {
      waiters.tasks.add(task);
      return;
    }
    const tasks = new Set([task]);
    const onAbort = (): void => {
      this.waiters.delete(signal);
      let kept = 0;
      for (const waiting of this.queue) if (!tasks.has(waiting)) this.queue[kept++] = waiting;
      this.queue.length = kept;
      for (const aborted of tasks) aborted.reject(signal.reason);
    };
    this.waiters.set(signal, { tasks, onAbort });
    signal.addEventListener('abort', onAbort, { once: true });
  }

  /** The task no longer waits (it starts, or is refused): its signal's listener goes with the last waiter. */
  private detach(task: Task): void {
    const signal = task.ctx.signal;
    const waiters = this.waiters.get(signal);
    if (!waiters?.tasks.delete(task) || waiters.tasks.size > 0) return;
    this.waiters.delete(signal);
    signal.removeEventListener('abort', waiters.onAbort);
  }

  private dequeueAll(): Task[] {
    const tasks = this.queue.splice(0);
    for (const task of tasks) this.detach(task);
    return tasks;
  }

  /** Starts one thread and puts it to work. */
  private async spawn(): Promise<void> {
    this.starting++;
    let thread: StageThread;
    try {
      thread = await StageThread.start({
        data: this.data,
        index: ++this.nextIndex,
        abortGraceMs: this.options.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS,
        log: this.options.log,
      });
    } finally {
      this.starting--;
    }
    thread.onExit = (dead, cause) => this.onExit(dead, cause);
    this.threads.add(thread);
    if (this.closing) {
      await thread.terminate();
      return;
    }
    this.idle.push(thread);
    this.dispatch();
  }

  private onExit(thread: StageThread, cause: Error): void {
    this.threads.delete(thread);
    const at = this.idle.indexOf(thread);
    if (at >= 0) this.idle.splice(at, 1);
    if (this.closing || !this.started) return;
    if (thread.terminatedAfterAbort) this.options.log.info('replacing the terminated stage thread', { thread: thread.index });
    else this.options.log.error('stage thread died; replacing it', { thread: thread.index, err: cause.message });
    this.replenish();
  }

  /** Brings the pool back to its size (after a thread died, or a replacement failed to start). */
  private replenish(): void {
    if (!this.started || this.closing) return;
    while (this.threads.size + this.starting < this.options.threads) {
      this.spawn().catch((err: unknown) => this.replacementFailed(err));
    }
  }

  /**
   * A replacement that does not start leaves the pool smaller. With no thread left, the waiting
   * jobs fail (and follow their retry policy) rather than wait for ever; the next job tries again.
   */
  private replacementFailed(err: unknown): void {
    this.options.log.error('stage thread could not be replaced', { err: (err as Error).message });
    if (this.threads.size > 0 || this.starting > 0 || this.closing) return;
    for (const task of this.dequeueAll()) task.reject(err);
  }
}

/** The fields of a logger's metadata that a worker thread can take along. */
function primitives(fields: unknown): Record<string, string | number | boolean> {
  const result: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries((fields ?? {}) as Record<string, unknown>)) {
    if (['string', 'number', 'boolean'].includes(typeof value)) result[key] = value as string | number | boolean;
  }
  return result;
}
