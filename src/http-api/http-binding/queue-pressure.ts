import type { CompiledConfig } from '../../config/config.types.js';
import { queueFor, settingsFor, variantOf } from '../../config/queue-resolver.js';
import { scheduledDelaySeconds } from '../../broker/job-router.js';
import { refusedQueue } from '../../broker/refusal-cause.js';
import type { QueueFullError } from '../../errors/errors.js';
import type { Job } from '../../job/job.types.js';
import { brokerNamesOf } from '../../topology/names.js';
import { ApiError } from '../api-error.js';

/** Reads a physical queue's ready jobs; undefined when the broker does not answer. */
export type ReadDepth = (physicalQueue: string) => Promise<number | undefined>;

/** A job bound for a queue, and the headers it is published with (they pick a tenant's variant queue). */
export interface QueuedJob {
  job: Job;
  headers: Readonly<Record<string, unknown>>;
  /** Held in the parked queue until activated: not in its queue yet. */
  pending: boolean;
}

/** A physical queue's `max_size` and what goes with it, as in force now (the tenant's own settings included). */
interface Bound {
  physical: string;
  bound: number;
  warning: number;
  strategy: 'reject' | 'drop_oldest' | 'block';
}

/**
 * ojs-backpressure 7.3: the headers of a push into a bounded queue whose depth reached its
 * `max_size_warning` fraction of `max_size`; undefined below it, for an unbounded queue, a job
 * that does not enter the queue now (scheduled, pending), or when the depth cannot be read. The
 * depth is the physical queue's ready jobs, what the broker counts against `max_size`.
 */
export async function pushPressure(
  config: CompiledConfig,
  queued: QueuedJob,
  readDepth: ReadDepth,
): Promise<Record<string, string> | undefined> {
  const bound = boundOf(config, queued);
  if (bound === undefined) return undefined;
  const depth = await readDepth(bound.physical);
  if (depth === undefined || depth < bound.warning * bound.bound) return undefined;
  return pressureHeaders(depth, bound.bound);
}

/**
 * ojs-backpressure 9.3, `reject`: a batch that does not fit in a queue's room is refused whole,
 * before any job is sent (429 QUEUE_FULL, the fullest queue's depth and bound). A push racing the
 * batch can still take the room between this check and the publishes; the broker then refuses
 * the job that does not fit, and those before it stay enqueued. `block` queues are left to their
 * producers' wait, `drop_oldest` ones never refuse.
 */
export async function checkBatchRoom(config: CompiledConfig, batch: readonly QueuedJob[], readDepth: ReadDepth): Promise<void> {
  const wanted = new Map<string, { bound: Bound; jobs: number; queue: string }>();
  for (const queued of batch) {
    const bound = boundOf(config, queued);
    if (bound?.strategy !== 'reject') continue;
    const seen = wanted.get(bound.physical);
    wanted.set(bound.physical, { bound, jobs: (seen?.jobs ?? 0) + 1, queue: queued.job.queue });
  }
  for (const { bound, jobs, queue } of wanted.values()) {
    const depth = await readDepth(bound.physical);
    if (depth === undefined || depth + jobs <= bound.bound) continue;
    throw new ApiError(
      429,
      'QUEUE_FULL',
      `queue "${queue}" holds ${depth} of its max_size ${bound.bound} jobs: the batch's ${jobs} jobs for it do not fit, nothing was enqueued`,
      { queue, depth, bound: bound.bound, strategy: bound.strategy, batch_jobs: jobs },
      pressureHeaders(depth, bound.bound),
    );
  }
}

/**
 * ojs-backpressure 7.1: a push the broker refused as full, answered 429 `QUEUE_FULL` with the
 * queue's depth and bound (headers and details). A refused queue is at its bound: when its depth
 * cannot be read, the bound stands for it. A refusal whose queue or bound is not known (bounded in
 * bytes only) keeps the refusal's own answer (`Retry-After` alone).
 */
export async function queueFullAnswer(config: CompiledConfig, refusal: QueueFullError, readDepth: ReadDepth): Promise<Error> {
  const physical = refusedQueue(config, refusal);
  if (physical === undefined || refusal.queue === undefined) return refusal;
  const logical = queueFor(config, refusal.queue);
  const settings = settingsFor(config, refusal.queue, logical.scope === 'shared' ? undefined : refusal.tenant);
  if (settings.max_size === undefined) return refusal;
  const depth = (await readDepth(physical)) ?? settings.max_size;
  return new ApiError(
    429,
    'QUEUE_FULL',
    refusal.message,
    {
      queue: refusal.queue,
      ...(refusal.tenant === undefined ? {} : { tenant: refusal.tenant }),
      depth,
      bound: settings.max_size,
      strategy: settings.overflow_policy,
    },
    pressureHeaders(depth, settings.max_size),
  );
}

/** The depth, the bound and their ratio (two decimals): ojs-backpressure 7.2 and 7.3. */
function pressureHeaders(depth: number, bound: number): Record<string, string> {
  return {
    'X-OJS-Queue-Depth': String(depth),
    'X-OJS-Queue-Bound': String(bound),
    'X-OJS-Queue-Pressure': String(Math.round((depth / bound) * 100) / 100),
  };
}

/**
 * The bound of the physical queue a job enters now (the shared queue, or its tenant's variant or
 * general queue), or undefined: unbounded in jobs, scheduled (it waits on the delay ladder),
 * pending (it waits in the parked queue).
 */
function boundOf(config: CompiledConfig, { job, headers, pending }: QueuedJob): Bound | undefined {
  if (pending || scheduledDelaySeconds(job, Date.now()) !== undefined) return undefined;
  const logical = queueFor(config, job.queue);
  const shared = logical.scope === 'shared';
  const settings = settingsFor(config, job.queue, shared ? undefined : job.tenant);
  if (settings.max_size === undefined) return undefined;
  const names = brokerNamesOf(config);
  const physical = shared ? names.queue(job.queue) : names.queue(job.queue, job.tenant, variantOf(logical, headers));
  return { physical, bound: settings.max_size, warning: settings.max_size_warning, strategy: settings.overflow_policy };
}
