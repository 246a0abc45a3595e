import type { EmitSpec, Job } from '../job/job.types.js';
import type { WorkflowSpec } from '../job/workflow.types.js';
import type { Logger } from '../logging/logger.js';

/** What `@Stage()` records about a stage class. */
export interface StageMetadata {
  /** Stage name, as used by `stagecoach run <stage>` and `stages.<name>` in the configuration. */
  name: string;
  /** The one logical queue the stage reads. */
  input: string;
  /** The logical queues it may emit to. @defaultValue [] */
  outputs: readonly string[];
  /** Job types it handles; anything else is dead-lettered as INVALID_PAYLOAD. @defaultValue all */
  types?: readonly string[];
  /**
   * Its jobs are claimed by remote workers over the OJS HTTP binding (src/http-api/http-binding/): the
   * handler waits for a claim, so the start is reported at the claim (StageRunner.started), not
   * when the handler is called, and the visibility timeout stands for the job's timeout.
   * @defaultValue false
   */
  remote?: boolean;
}

/** Handed to `handle()` with every job. Valid only until `handle()` settles. */
export interface StageContext {
  /** The stage's name. */
  readonly stage: string;
  /** The tenant of the job (undefined for a job on a shared queue that carries none). */
  readonly tenant: string | undefined;
  /** AMQP headers the job arrived with (routing headers such as `mime` included). */
  readonly headers: Readonly<Record<string, unknown>>;
  /**
   * Aborted when the job runs past its timeout (the job's `timeout`, else the queue's
   * `default_timeout`), or when its delivery is lost (the channel or connection that carried it
   * died: the broker delivers the job again). Pass it to fetch, streams and child processes so
   * that their work stops too; the job has then failed with HANDLER_TIMEOUT, or its run is void
   * (reason: a DeliveryLostError, DELIVERY_LOST), and its emits are refused.
   */
  readonly signal: AbortSignal;
  /** Logger whose lines carry the job id, type, tenant, stage and attempt. */
  readonly log: Logger;
  /**
   * Enqueues a job to one of the stage's outputs. The job inherits the tenant, the trace parent
   * and gets `meta.parent_id`. Resolves when the job is on its way: past the enqueue middleware,
   * its payload stored, handed to the broker's channel (waiting while that channel is saturated or
   * healing). The input is acknowledged only after every emitted job is confirmed by the broker,
   * even ones not awaited; an emit the broker then refuses (a full queue) fails the input job as a
   * thrown error would (retried or dead-lettered with that error). It joins the handled job's
   * batch, unless `batch` names a new one, which it starts (docs/batches.md); that one resolves
   * when confirmed.
   * @returns the new job's id.
   */
  emit(output: string, job: EmitSpec): Promise<string>;
  /**
   * Starts a workflow (docs/workflows.md): `ctx.emit(chain(a, group(b, c), d))`. Every job of it
   * goes to one of the stage's outputs; it belongs to the handled job's tenant and continues its
   * trace; its id is derived from the handled job's and how many workflows the handler started
   * before (a retry starts the same one, once). Resolves with the workflow's id once its record
   * is confirmed, and the input is acknowledged only after that. The workflow is a batch of its
   * own: the handled job's batch does not wait for it.
   */
  emit(workflow: WorkflowSpec): Promise<string>;
  /**
   * Resolves once every job emitted so far is confirmed by the broker; rejects with the first
   * refusal (the input job then fails at settlement as well). For a handler that must know its
   * output is durable before it goes on, such as one that deletes its source file after emitting.
   */
  confirmed(): Promise<void>;
  /**
   * Reports how far the job got (spec/ojs-progress.md): `fraction` from 0.0 to 1.0 (clamped;
   * lower than an earlier report of this run is ignored), `message` shown beside it until another
   * is given. Shown by `job status`, `GET /ojs/v1/jobs/{id}` and the dashboard for a tracked job,
   * and published as `progress.updated` on a queue with `events`. Fire and forget: never throws,
   * and at most one report a second per job goes out (the latest); the job's completion shows 1.0.
   */
  progress(fraction: number, message?: string): void;
}

/**
 * A stage class implements this. A thrown error is a failure of the job. What it returns is the
 * job's result, which execution middleware may read or replace.
 */
export interface StageHandler {
  /**
   * Runs one job. What it returns (or resolves to), when not undefined, is the job's result
   * (spec/ojs-results.md): kept with a tracked job's state (`job status`), so a JSON value.
   */
  handle(job: Job, ctx: StageContext): unknown;
}
