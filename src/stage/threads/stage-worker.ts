/**
 * Entry module of a stage worker thread (see `stage-thread.ts` for the main side).
 *
 * Lifecycle: on start it imports the stage module and builds the stage exactly as the main
 * thread would (one inversify container, the same injection tokens), then posts `ready`, or
 * `startup-failed` with the error. Then it runs one job at a time as the main thread hands
 * them over. `ctx.emit()` is a request to the main thread, which emits through the delivery's
 * real context, so the at-least-once bookkeeping (confirms before the ack) never leaves the
 * main thread. The main thread terminates the worker when the pool closes.
 *
 * A worker of a pool that serves many tenants (`perTenant`) only imports the module at start:
 * it builds a tenant's instance, in a container of its own, when it first runs a job of that
 * tenant, keeps it for the tenant's next jobs, and drops it on `release`.
 */
import 'reflect-metadata';
import { parentPort, workerData } from 'node:worker_threads';
import type { EmitSpec, Job } from '../../job/job.types.js';
import type { WorkflowSpec } from '../../job/workflow.types.js';
import { createLogger, type Logger } from '../../logging/logger.js';
import { buildStageInstance, type StageInstance } from '../stage-container.js';
import { loadStage, type LoadedStage } from '../stage-loader.js';
import type { StageContext } from '../stage.types.js';
import { fromTransferable, toTransferable } from './error-transfer.js';
import type { FromWorker, StageWorkerData, ToWorker } from './protocol.js';
import { resultText } from '../../job/job-result.js';

if (!parentPort) throw new Error('stage-worker.js runs in a worker thread only');
const port = parentPort;
const data = workerData as StageWorkerData;
const log = createLogger(data.logFields, data.logLevel);

/** Abort controllers of the jobs running here, by sequence number. */
const running = new Map<number, AbortController>();
/** Emits waiting for the main thread's answer, by call number. */
const calls = new Map<number, { resolve: (id: string) => void; reject: (err: Error) => void }>();
let nextCall = 0;

/** A stage instance of this thread, and the jobs that use it. */
interface Instance {
  built: Promise<StageInstance>;
  jobs: number;
  /** Set by a release waiting for the instance's job to end before disposing of it. */
  onIdle: (() => void) | undefined;
}

let stage: LoadedStage | undefined;
/** The one instance of a worker that serves one tenant. */
let fixed: Instance | undefined;
/** Per tenant (`undefined`: jobs that carry none), when the worker serves many. */
const instances = new Map<string | undefined, Instance>();

const post = (message: FromWorker): void => port.postMessage(message);

port.on('message', (message: ToWorker) => {
  switch (message.kind) {
    case 'job':
      void run(message);
      break;
    case 'abort':
      running.get(message.seq)?.abort(fromTransferable(message.reason));
      break;
    case 'release':
      void release(message);
      break;
    case 'emit-result':
      calls.get(message.call)?.resolve(message.id);
      calls.delete(message.call);
      break;
    case 'emit-error':
      calls.get(message.call)?.reject(fromTransferable(message.error));
      calls.delete(message.call);
      break;
  }
});

try {
  stage = await loadStage(data.config, data.stage);
  // Built now, so that a stage that cannot be built fails the pool's creation, not a job.
  if (!data.perTenant) fixed = { built: Promise.resolve(await build(data.tenant, log)), jobs: 0, onIdle: undefined };
  post({ kind: 'ready' });
} catch (err) {
  // The main thread terminates this worker and fails the pool's creation with the error.
  post({ kind: 'startup-failed', error: toTransferable(err) });
}

function build(tenant: string | undefined, logger: Logger): Promise<StageInstance> {
  return buildStageInstance(stage as LoadedStage, data.config, tenant, logger, data.variant);
}

/**
 * The tenant's instance, built on first use. Registered before its build settles, so that a
 * `release` arriving meanwhile finds it; a build that fails is forgotten, so the tenant's next
 * job tries again (and fails on its own if the stage still cannot be built).
 */
function instanceOf(tenant: string | undefined): Instance {
  const known = instances.get(tenant);
  if (known) return known;
  const instance: Instance = { built: build(tenant, tenant === undefined ? log : log.child({ tenant })), jobs: 0, onIdle: undefined };
  instance.built.catch(() => {
    if (instances.get(tenant) === instance) instances.delete(tenant);
  });
  instances.set(tenant, instance);
  return instance;
}

async function run(message: Extract<ToWorker, { kind: 'job' }>): Promise<void> {
  const controller = new AbortController();
  running.set(message.seq, controller);
  const ctx = new WorkerJobContext(message, controller.signal);
  const instance = fixed ?? instanceOf(message.tenant);
  instance.jobs++;
  try {
    const { handler } = await instance.built;
    const returned = await handler.handle(message.job, ctx);
    // An emit that never reached the main thread is not in its bookkeeping: fail the job here.
    if (ctx.unsent) throw ctx.unsent;
    const { text, problem } = resultText(returned);
    post({
      kind: 'done',
      seq: message.seq,
      ...(text === undefined ? {} : { result: text }),
      ...(problem === undefined ? {} : { problem }),
    });
  } catch (err) {
    post({ kind: 'failed', seq: message.seq, error: toTransferable(err) });
  } finally {
    running.delete(message.seq);
    if (--instance.jobs === 0) instance.onIdle?.();
  }
}

/**
 * Forgets the tenant's instance at once (a later job of the tenant builds a new one), and
 * disposes of it once the job using it, if any, has settled.
 */
async function release(message: Extract<ToWorker, { kind: 'release' }>): Promise<void> {
  const instance = instances.get(message.tenant);
  instances.delete(message.tenant);
  try {
    if (instance) {
      if (instance.jobs > 0) await new Promise<void>((resolve) => (instance.onIdle = resolve));
      const built = await instance.built.catch(() => undefined);
      await built?.dispose();
    }
    post({ kind: 'released', call: message.call });
  } catch (err) {
    post({ kind: 'released', call: message.call, error: toTransferable(err) });
  }
}

/** The worker side of a delivery's `StageContext`. */
class WorkerJobContext implements StageContext {
  readonly stage: string;
  readonly tenant: string | undefined;
  readonly headers: Readonly<Record<string, unknown>>;
  /** The first emit that could not be posted to the main thread. */
  unsent: Error | undefined;
  private readonly job: Job;
  private readonly seq: number;
  private logger: Logger | undefined;

  constructor(
    message: Extract<ToWorker, { kind: 'job' }>,
    readonly signal: AbortSignal,
  ) {
    this.stage = message.stage;
    this.tenant = message.tenant;
    this.headers = Object.freeze(message.headers);
    this.job = message.job;
    this.seq = message.seq;
  }

  get log(): Logger {
    this.logger ??= log.child({ job_id: this.job.id, job_type: this.job.type, tenant: this.job.tenant, attempt: this.job.attempt });
    return this.logger;
  }

  async confirmed(): Promise<void> {
    await new Promise<string>((resolve, reject) => {
      const call = ++nextCall;
      calls.set(call, { resolve, reject });
      post({ kind: 'confirmed', seq: this.seq, call });
    });
  }

  progress(fraction: number, message?: string): void {
    try {
      post({ kind: 'progress', seq: this.seq, fraction, message: typeof message === 'string' ? message : undefined });
    } catch {
      // Fire and forget: a value that cannot be posted is no progress.
    }
  }

  emit(output: string, spec: EmitSpec): Promise<string>;
  emit(workflow: WorkflowSpec): Promise<string>;
  emit(target: string | WorkflowSpec, spec?: EmitSpec): Promise<string> {
    const sent = new Promise<string>((resolve, reject) => {
      const call = ++nextCall;
      calls.set(call, { resolve, reject });
      try {
        if (typeof target === 'string') post({ kind: 'emit', seq: this.seq, call, output: target, spec: spec as EmitSpec });
        else post({ kind: 'emit', seq: this.seq, call, output: undefined, spec: target });
      } catch (err) {
        // A spec that cannot be cloned (a function in `args`) never reaches the main thread.
        calls.delete(call);
        this.unsent ??= err as Error;
        reject(err as Error);
      }
    });
    // As on the main thread: the main side's settle() reports a failed emit, so one the
    // handler did not await must not crash this thread as an unhandled rejection.
    sent.catch(() => undefined);
    return sent;
  }
}
