import type { HeaderValue, Job } from '../../job/job.types.js';
import type { StageContext } from '../stage.types.js';

/*
 * The two middleware chains of OJS (openjobspec/spec `spec/ojs-middleware.md`; docs/middleware.md):
 * enqueue middleware around the publishing of a job (`Publisher`, `ctx.emit`), execution
 * middleware around a stage's handler. Both are `next()` style: each middleware decides whether,
 * and when, the rest of the chain runs.
 */

/**
 * A job on its way to the broker, as enqueue middleware sees it: the complete OJS envelope
 * (`id`, `type`, `queue`, `args`, `meta`, ...) and the AMQP `headers` it will carry (a variant
 * header such as `mime` among them; a non-enumerable property, never part of the envelope). It
 * is the job being published itself, not a copy. A middleware may change any of it except `id`,
 * `queue`, `tenant` and `meta.batch`, which decide where the job goes and what it belongs to:
 * changing one is refused with an `EnqueueRefusedError`.
 */
export interface OutgoingJob extends Job {
  headers: Record<string, HeaderValue>;
}

/**
 * Passes the job to the rest of the chain and, at its end, publishes it. Resolves with the job's
 * id once the broker has confirmed it. `job`: a replacement object (by default the one the
 * middleware was given, changes included).
 */
export type EnqueueNext = (job?: OutgoingJob) => Promise<string>;

/**
 * Runs before a job is published, in registration order (OJS linear chain). Call `next()` to go
 * on, throw to refuse: the error reaches the caller of `publish()` or `ctx.emit()` as it is, and
 * nothing is published. Returning without calling `next()` refuses the job as well, with an
 * `EnqueueRefusedError` naming the middleware (stagecoach has no silent drop: `publish()` and
 * `emit()` resolve with the id of a job that was published). Its return value is not used.
 *
 * ```ts
 * const stampSource: EnqueueMiddleware = async (job, next) => {
 *   job.meta.source = 'billing';
 *   job.headers['x-origin'] = 'billing';
 *   return next();
 * };
 * ```
 */
export type EnqueueMiddleware = (job: OutgoingJob, next: EnqueueNext) => Promise<unknown>;

/** Runs the rest of the chain and the handler; resolves with the handler's result (what `handle()` returned). */
export type ExecutionNext = () => Promise<unknown>;

/**
 * Wraps a stage's handler (OJS nested chain): the first registered is the outermost. Call
 * `next()` once to run the rest of the chain and the handler; not calling it short-circuits (the
 * handler never runs, and the job settles by what the middleware does: returns, the job
 * completes; throws, it fails like a handler error and is retried, or discarded or
 * dead-lettered with `DiscardJob`, `DeadLetterJob`, `NonRetryableError`). What it returns is the
 * job's result, in place of the handler's. Calling `next()` twice is an error.
 *
 * ```ts
 * const timing: ExecutionMiddleware = async (job, ctx, next) => {
 *   const began = Date.now();
 *   try {
 *     return await next();
 *   } finally {
 *     ctx.log.info('handled', { ms: Date.now() - began });
 *   }
 * };
 * ```
 */
export type ExecutionMiddleware = (job: Job, ctx: StageContext, next: ExecutionNext) => Promise<unknown>;

/**
 * Middleware as `@Stage`, `StageGroup` and `Publisher` take it; each list runs in its order.
 * A stage group's (process-wide) runs outside a stage's.
 */
export interface Middleware {
  /** Around each job published (`Publisher`) or emitted (`ctx.emit`). @defaultValue [] */
  enqueue?: readonly EnqueueMiddleware[];
  /** Around each job's handler. @defaultValue [] */
  execution?: readonly ExecutionMiddleware[];
}

/** {@link Middleware} with both lists present (what the explorer reads from a stage class). */
export interface StageMiddleware {
  readonly enqueue: readonly EnqueueMiddleware[];
  readonly execution: readonly ExecutionMiddleware[];
}
