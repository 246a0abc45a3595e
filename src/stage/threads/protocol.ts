/**
 * Messages between the main thread and a stage worker thread. Everything crosses by structured
 * clone, so only data travels: jobs, headers, job specs and errors flattened by
 * `error-transfer.ts`. Both sides use one port (the worker's `parentPort`), whose messages
 * arrive in the order they were sent: an `emit` posted before `done` is seen by the main
 * thread before `done`, so the emit is counted before the input may be acknowledged.
 */
import type { CompiledConfig } from '../../config/config.types.js';
import type { WorkflowSpec } from '../../job/workflow.types.js';
import type { EmitSpec, Job } from '../../job/job.types.js';
import type { TransferredError } from './error-transfer.js';

/** `workerData` of a stage worker: enough to build the stage exactly as the main thread would. */
export interface StageWorkerData {
  config: CompiledConfig;
  stage: string;
  /**
   * `false`: the worker builds the one instance of `tenant` at start. `true` (a pool that serves
   * many tenants): it only loads the module at start, and builds an instance per tenant the
   * first time it runs a job of that tenant (`tenant` is then undefined).
   */
  perTenant: boolean;
  tenant: string | undefined;
  variant: string | undefined;
  /** The main logger's level and primitive fields, so the worker's lines look the same. */
  logLevel: string;
  logFields: Record<string, string | number | boolean>;
}

/** Main thread -> worker. */
export type ToWorker =
  | { kind: 'job'; seq: number; job: Job; headers: Record<string, unknown>; stage: string; tenant: string | undefined }
  | { kind: 'abort'; seq: number; reason: TransferredError }
  /** Drop (and dispose) the tenant's instance; answered by `released` once it is gone. */
  | { kind: 'release'; call: number; tenant: string }
  | { kind: 'emit-result'; call: number; id: string }
  | { kind: 'emit-error'; call: number; error: TransferredError };

/** Worker -> main thread. */
export type FromWorker =
  | { kind: 'ready' }
  | { kind: 'startup-failed'; error: TransferredError }
  /** `ctx.emit(output, spec)`, or `ctx.emit(workflow)` when `output` is undefined. */
  | { kind: 'emit'; seq: number; call: number; output: string | undefined; spec: EmitSpec | WorkflowSpec }
  /** `ctx.confirmed()`: answered by `emit-result` (id '') or `emit-error` on the same call. */
  | { kind: 'confirmed'; seq: number; call: number }
  /** `ctx.progress(fraction, message)`: not answered (fire and forget). */
  | { kind: 'progress'; seq: number; fraction: number; message: string | undefined }
  /**
   * The handler returned: `result` is what it returned, as JSON text (job-result.ts); `problem`
   * why it could not be written so (the job completes without a recorded result).
   */
  | { kind: 'done'; seq: number; result?: string; problem?: string }
  /** `error`: the instance is dropped, but its disposal threw. */
  | { kind: 'released'; call: number; error?: TransferredError }
  | { kind: 'failed'; seq: number; error: TransferredError };
