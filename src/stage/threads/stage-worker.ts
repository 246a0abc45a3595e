/**
 * Entry module of a stage worker thread (see `stage-thread.ts` for the main side).
 *
 * Lifecycle: on start it builds the stage exactly as the main thread would (the stage module
 * imported in this thread, one inversify container, the same injection tokens) and posts
 * `ready`, or `startup-failed` with the error. Then it runs one job at a time as the main
 * thread hands them over. `ctx.emit()` is a request to the main thread, which emits through
 * the delivery's real context, so the at-least-once bookkeeping (confirms before the ack)
 * never leaves the main thread. The main thread terminates the worker when the pool closes.
 */
import 'reflect-metadata';
import { parentPort, workerData } from 'node:worker_threads';
import type { Job, JobSpec } from '../../job/job.types.js';
import { createLogger, type Logger } from '../../logging/logger.js';
import { createStageInstance } from '../stage-container.js';
import { loadStage } from '../stage-loader.js';
import type { StageContext, StageHandler } from '../stage.types.js';
import { fromTransferable, toTransferable } from './error-transfer.js';
import type { FromWorker, StageWorkerData, ToWorker } from './protocol.js';

if (!parentPort) throw new Error('stage-worker.js runs in a worker thread only');
const port = parentPort;
const data = workerData as StageWorkerData;
const log = createLogger(data.logFields, data.logLevel);

/** Abort controllers of the jobs running here, by sequence number. */
const running = new Map<number, AbortController>();
/** Emits waiting for the main thread's answer, by call number. */
const calls = new Map<number, { resolve: (id: string) => void; reject: (err: Error) => void }>();
let nextCall = 0;
let handler: StageHandler | undefined;

const post = (message: FromWorker): void => port.postMessage(message);

port.on('message', (message: ToWorker) => {
  switch (message.kind) {
    case 'job':
      void run(message);
      break;
    case 'abort':
      running.get(message.seq)?.abort(fromTransferable(message.reason));
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
  const stage = await loadStage(data.config, data.stage);
  handler = await createStageInstance(stage, data.config, data.tenant, log, data.variant);
  post({ kind: 'ready' });
} catch (err) {
  // The main thread terminates this worker and fails `createThreadedHandler` with the error.
  post({ kind: 'startup-failed', error: toTransferable(err) });
}

async function run(message: Extract<ToWorker, { kind: 'job' }>): Promise<void> {
  const controller = new AbortController();
  running.set(message.seq, controller);
  const ctx = new WorkerJobContext(message, controller.signal);
  try {
    await (handler as StageHandler).handle(message.job, ctx);
    // An emit that never reached the main thread is not in its bookkeeping: fail the job here.
    if (ctx.unsent) throw ctx.unsent;
    post({ kind: 'done', seq: message.seq });
  } catch (err) {
    post({ kind: 'failed', seq: message.seq, error: toTransferable(err) });
  } finally {
    running.delete(message.seq);
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

  emit(output: string, spec: JobSpec): Promise<string> {
    const sent = new Promise<string>((resolve, reject) => {
      const call = ++nextCall;
      calls.set(call, { resolve, reject });
      try {
        post({ kind: 'emit', seq: this.seq, call, output, spec });
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
