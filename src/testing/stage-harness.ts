import { scheduledDelaySeconds, type JobSink } from '../broker/job-router.js';
import { compileConfig } from '../config/compile-config.js';
import type { CompiledConfig, RawConfig } from '../config/config.types.js';
import { createJob } from '../job/envelope.js';
import type { HeaderValue, Job, PublishSpec } from '../job/job.types.js';
import { createLogger, type Logger } from '../logging/logger.js';
import { JobContext } from '../stage/job-context.js';
import { createStageInstance } from '../stage/stage-container.js';
import { withExecutionMiddleware } from '../stage/middleware/execution-chain.js';
import type { EnqueueMiddleware, Middleware } from '../stage/middleware/middleware.types.js';
import { stageMetadataOf, stageMiddlewareOf, type StageClass } from '../stage/stage-explorer.js';
import type { StageHandler, StageMetadata } from '../stage/stage.types.js';
import type { ContainerModule } from 'inversify';
import type { TrackingRecord, WorkflowRecord } from '../tracking-stream/tracking-report.js';

export interface EmittedJob {
  output: string;
  job: Job;
  headers: Record<string, HeaderValue>;
}

export interface HarnessResult {
  emitted: EmittedJob[];
  /** What the handler returned (its result). */
  result: unknown;
  /** The workflows it started (`ctx.emit(workflow)`), as their records: definition, tenant, parent. */
  workflows: WorkflowRecord[];
  /** Every `ctx.progress()` call, in order, as made: not clamped, not throttled. */
  progress: ProgressCall[];
}

export interface ProgressCall {
  fraction: number;
  message?: string;
}

/**
 * Runs a stage's `handle()` in memory, without a broker: the stage is built through the same
 * container as in production (its injected services included), and every `ctx.emit()` is
 * recorded instead of published, and so is every `ctx.progress()`. Middleware runs as in a stage group: `options.middleware` (the
 * group's, process-wide) outside the stage's own (`@Stage({ middleware })`); the recorded jobs
 * are what the enqueue middleware let through, as it changed them.
 *
 * ```ts
 * const harness = await StageHarness.create(Matcher, { tenant: 'acme' });
 * const { emitted } = await harness.run({ type: 'doc.text', args: ['mail me: a@b.dk'] });
 * ```
 */
export class StageHarness {
  private constructor(
    readonly metadata: StageMetadata,
    private readonly handler: StageHandler,
    private readonly tenant: string | undefined,
    private readonly log: Logger,
    private readonly enqueue: readonly EnqueueMiddleware[],
  ) {}

  static async create(
    target: StageClass,
    options: {
      tenant?: string;
      config?: RawConfig;
      modules?: ContainerModule[];
      stageOptions?: Record<string, unknown>;
      /** Process-wide middleware, as `StageGroupOptions.middleware`. @defaultValue none */
      middleware?: Middleware;
    } = {},
  ): Promise<StageHarness> {
    const metadata = stageMetadataOf(target);
    if (!metadata) throw new TypeError(`${target.name} is not decorated with @Stage`);
    const raw: RawConfig = options.config ?? {};
    const config: CompiledConfig = compileConfig({
      ...raw,
      stages: { ...raw.stages, [metadata.name]: { module: '<harness>', options: options.stageOptions ?? {} } },
    });
    const log = createLogger({ stage: metadata.name, harness: true }, process.env.LOG_LEVEL ?? 'warn');
    const middleware = stageMiddlewareOf(target);
    const handler = await createStageInstance(
      { metadata, target, middleware, modules: options.modules ?? [] },
      config,
      options.tenant,
      log,
    );
    const group = options.middleware ?? {};
    return new StageHarness(metadata, withExecutionMiddleware(handler, group.execution ?? []), options.tenant, log, [
      ...(group.enqueue ?? []),
      ...middleware.enqueue,
    ]);
  }

  /**
   * Hands one job to the stage; resolves with what it emitted, returned and started, rejects with
   * what it threw. `parent_results`: the input of a workflow step (docs/workflows.md).
   */
  async run(spec: PublishSpec & { parent_results?: unknown[] }, headers: Record<string, unknown> = {}): Promise<HarnessResult> {
    const tenant = spec.tenant ?? this.tenant;
    const job = createJob(spec, { queue: this.metadata.input });
    if (spec.parent_results !== undefined) job.parent_results = spec.parent_results;
    // Set past createJob's slug check on purpose: a stage's own defences (a tenant used as a file
    // name) stay testable with a tenant the framework would refuse on receipt. Its emits inherit
    // the tenant and are refused as they would be in a running stage.
    if (tenant !== undefined) job.tenant = tenant;
    const emitted: EmittedJob[] = [];
    const sink: JobSink = {
      send: (sent, wire) => {
        // Refused as a running stage's router refuses it: a time beyond the delay ladder's reach.
        scheduledDelaySeconds(sent, Date.now());
        emitted.push({ output: sent.queue, job: sent, headers: { ...wire?.headers } });
        return Promise.resolve();
      },
    };
    // No tracking stream here: a batch a handler starts shows in the emitted job's `meta.batch`,
    // a workflow in `workflows`.
    const workflows: WorkflowRecord[] = [];
    const track = (record: TrackingRecord): Promise<void> => {
      if (record.kind === 'workflow') workflows.push(record);
      return Promise.resolve();
    };
    const progress: ProgressCall[] = [];
    const ctx = new JobContext(
      this.metadata.name,
      this.metadata.outputs,
      job,
      { ...spec.headers, ...headers },
      sink,
      this.log,
      undefined,
      undefined,
      track,
      this.enqueue,
      false,
      undefined,
      (fraction, message) => progress.push({ fraction, ...(message === undefined ? {} : { message }) }),
    );
    const result = await this.handler.handle(job, ctx);
    await ctx.settle();
    return { emitted, result, workflows, progress };
  }
}
