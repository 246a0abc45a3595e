/**
 * The main-thread side of one stage worker thread (`stage-worker.ts`): starts it, hands it one
 * job at a time, answers its emits through the delivery's real context, forwards the abort of
 * `ctx.signal`, and notices when it dies.
 *
 * Lifecycle: `StageThread.start()` resolves once the worker has built its stage instance (or
 * rejects with the worker's start-up error). `run()` settles with the job's outcome, or rejects
 * with a {@link ThreadCrashError} when the worker dies under the job; `onExit` then tells the
 * pool to replace it. `release()` has the worker of a pool that serves many tenants drop one
 * tenant's instance. `terminate()` ends it.
 */
import { Worker } from 'node:worker_threads';
import { StagecoachError } from '../../errors/errors.js';
import type { EmitSpec, Job } from '../../job/job.types.js';
import type { WorkflowSpec } from '../../job/workflow.types.js';
import type { Logger } from '../../logging/logger.js';
import { canAbort } from '../never-aborted.js';
import type { StageContext } from '../stage.types.js';
import { fromTransferable, toTransferable } from './error-transfer.js';
import type { FromWorker, StageWorkerData, ToWorker } from './protocol.js';
import { UNRECORDABLE_RESULT } from '../../job/job-result.js';

const WORKER_ENTRY = new URL('./stage-worker.js', import.meta.url);

/** The worker thread running a job died (uncaught exception, `process.exit()`, out of memory). */
export class ThreadCrashError extends StagecoachError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('HANDLER_ERROR', message, options);
  }
}

export interface StageThreadOptions {
  data: StageWorkerData;
  /** Numbers the threads of a pool in log lines and thread names. */
  index: number;
  /**
   * How long a job whose `ctx.signal` was aborted may go on before its thread is terminated
   * (and replaced): a handler that ignores the signal must not hold a thread for ever.
   */
  abortGraceMs: number;
  log: Logger;
}

interface Running {
  seq: number;
  ctx: StageContext;
  /** With what the handler returned (undefined when it returned nothing JSON can write). */
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
  onAbort: () => void;
  graceTimer: NodeJS.Timeout | undefined;
}

export class StageThread {
  /** Called once when the worker has exited, whatever the cause. */
  onExit: ((thread: StageThread, cause: Error) => void) | undefined;
  private readonly worker: Worker;
  private readonly ready: Promise<void>;
  private running: Running | undefined;
  private nextSeq = 0;
  /** Releases the worker has not answered yet, by call number. */
  private readonly releases = new Map<number, { tenant: string; resolve: () => void }>();
  private nextCall = 0;
  private exited = false;
  /** Terminated because its handler ignored an abort (not a crash). */
  private abandoned = false;
  /** Why the worker is going away: its uncaught error, or our reason for terminating it. */
  private cause: Error | undefined;

  private constructor(private readonly options: StageThreadOptions) {
    this.worker = new Worker(WORKER_ENTRY, { workerData: options.data, name: `stage ${options.data.stage} #${options.index}` });
    this.ready = new Promise<void>((resolve, reject) => {
      this.worker.on('message', (message: FromWorker) => {
        if (message.kind === 'ready') resolve();
        else if (message.kind === 'startup-failed') {
          reject(fromTransferable(message.error));
          void this.worker.terminate();
        } else this.onMessage(message);
      });
      this.worker.on('error', (err: Error) => {
        this.cause ??= err;
      });
      this.worker.on('exit', (code: number) => {
        this.exited = true;
        const cause = this.cause ?? new ThreadCrashError(`worker thread exited with code ${code}`);
        reject(cause);
        this.fail(cause);
        // Whatever the worker held went with it.
        for (const release of this.releases.values()) release.resolve();
        this.releases.clear();
        this.onExit?.(this, cause);
      });
    });
  }

  static async start(options: StageThreadOptions): Promise<StageThread> {
    const thread = new StageThread(options);
    await thread.ready;
    return thread;
  }

  get index(): number {
    return this.options.index;
  }

  get alive(): boolean {
    return !this.exited;
  }

  /** Whether it was terminated on purpose because its handler outlived an abort. */
  get terminatedAfterAbort(): boolean {
    return this.abandoned;
  }

  /** Runs one job in the worker; the thread takes one job at a time. Resolves with what its handler returned. */
  run(job: Job, ctx: StageContext): Promise<unknown> {
    if (this.exited) return Promise.reject(new ThreadCrashError('worker thread is gone'));
    if (this.running) return Promise.reject(new Error(`stage thread #${this.index} is busy`));
    return new Promise<unknown>((resolve, reject) => {
      const seq = ++this.nextSeq;
      const onAbort = (): void => this.abort(seq);
      this.running = { seq, ctx, resolve, reject, onAbort, graceTimer: undefined };
      try {
        this.post({ kind: 'job', seq, job, headers: { ...ctx.headers }, stage: ctx.stage, tenant: ctx.tenant });
      } catch (err) {
        // Headers that cannot be cloned: the job never started.
        this.settle(seq, err as Error);
        return;
      }
      if (ctx.signal.aborted) onAbort();
      else if (canAbort(ctx.signal)) ctx.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Has the worker drop the tenant's instance (disposing of it once the job using it, if any,
   * has settled). Resolves once it is gone, or the worker is; never rejects: a disposal that
   * throws is logged, and the instance is dropped all the same.
   */
  release(tenant: string): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const call = ++this.nextCall;
      this.releases.set(call, { tenant, resolve });
      this.post({ kind: 'release', call, tenant });
    });
  }

  async terminate(): Promise<void> {
    this.cause ??= new ThreadCrashError('worker thread terminated');
    await this.worker.terminate();
  }

  private onMessage(message: FromWorker): void {
    const running = this.running;
    switch (message.kind) {
      case 'emit': {
        if (running?.seq !== message.seq) {
          this.post({
            kind: 'emit-error',
            call: message.call,
            error: toTransferable(new StagecoachError('INVALID_REQUEST', 'emitted after its handler returned')),
          });
          return;
        }
        // The real context records the emit now, before any later `done` from this port.
        let sent: Promise<string>;
        try {
          sent =
            message.output === undefined
              ? running.ctx.emit(message.spec as WorkflowSpec)
              : running.ctx.emit(message.output, message.spec as EmitSpec);
        } catch (err) {
          sent = Promise.reject(err as Error);
        }
        sent.then(
          (id) => this.post({ kind: 'emit-result', call: message.call, id }),
          (err: unknown) => this.post({ kind: 'emit-error', call: message.call, error: toTransferable(err) }),
        );
        return;
      }
      case 'progress':
        // The run it belongs to may be over: then it is dropped, as the real context drops it.
        if (running?.seq === message.seq) running.ctx.progress(message.fraction, message.message);
        return;
      case 'confirmed': {
        const confirmed = running?.seq === message.seq ? running.ctx.confirmed() : Promise.resolve();
        confirmed.then(
          () => this.post({ kind: 'emit-result', call: message.call, id: '' }),
          (err: unknown) => this.post({ kind: 'emit-error', call: message.call, error: toTransferable(err) }),
        );
        return;
      }
      case 'done':
        if (message.problem !== undefined) {
          this.options.log.warn(UNRECORDABLE_RESULT, {
            thread: this.index,
            err: message.problem,
          });
        }
        this.settle(message.seq, undefined, message.result === undefined ? undefined : JSON.parse(message.result));
        return;
      case 'failed':
        this.settle(message.seq, fromTransferable(message.error));
        return;
      case 'released': {
        const release = this.releases.get(message.call);
        this.releases.delete(message.call);
        if (message.error) {
          this.options.log.warn('disposing of a released stage instance failed', {
            thread: this.index,
            tenant: release?.tenant,
            err: fromTransferable(message.error).message,
          });
        }
        release?.resolve();
        return;
      }
    }
  }

  /** Forwards the abort to the worker; terminates it if the job outlives the grace period. */
  private abort(seq: number): void {
    const running = this.running;
    if (running?.seq !== seq) return;
    const reason: unknown = running.ctx.signal.reason;
    this.post({ kind: 'abort', seq, reason: toTransferable(reason) });
    running.graceTimer = setTimeout(() => {
      if (this.running?.seq !== seq) return;
      this.options.log.warn('handler ignored its abort: terminating its worker thread', {
        thread: this.index,
        grace_ms: this.options.abortGraceMs,
      });
      this.cause = reason instanceof Error ? reason : new ThreadCrashError(String(reason));
      this.abandoned = true;
      void this.worker.terminate();
    }, this.options.abortGraceMs);
  }

  private settle(seq: number, error?: Error, result?: unknown): void {
    const running = this.running;
    if (running?.seq !== seq) return;
    this.running = undefined;
    clearTimeout(running.graceTimer);
    running.ctx.signal.removeEventListener('abort', running.onAbort);
    if (error) running.reject(error);
    else running.resolve(result);
  }

  /** The worker died: the job it ran fails with the cause. */
  private fail(cause: Error): void {
    if (!this.running) return;
    const error = cause instanceof StagecoachError ? cause : new ThreadCrashError(`worker thread died: ${cause.message}`, { cause });
    if (!(cause instanceof StagecoachError) && cause.stack)
      error.stack = `${error.name}: ${error.message}\n${cause.stack.split('\n').slice(1).join('\n')}`;
    this.settle(this.running.seq, error);
  }

  private post(message: ToWorker): void {
    // A message to a worker that has exited goes nowhere; its exit fails the job instead.
    if (!this.exited) this.worker.postMessage(message);
  }
}
