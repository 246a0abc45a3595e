import { EnqueueRefusedError, StagecoachError } from '../../errors/errors.js';
import type { HeaderValue, Job } from '../../job/job.types.js';
import { middlewareName } from './middleware-name.js';
import type { EnqueueMiddleware, OutgoingJob } from './middleware.types.js';

/** The end of the chain: publishes the (possibly changed) envelope with its headers. */
export type PublishStep = (job: Job, headers: Record<string, HeaderValue> | undefined) => Promise<void>;

/**
 * Runs `middleware` in order around `publish` (OJS linear chain) and resolves with the job's id
 * once it was published. Without middleware, `publish` alone: no copy of the job is made.
 *
 * Invariants: `publish` runs at most once, and only at the end of the chain; a middleware that
 * returns without calling `next()`, or changes the job's `id`, `queue`, `tenant` or `meta.batch`,
 * refuses the job (EnqueueRefusedError) and nothing is published. A middleware that catches the
 * publish's failure and returns cannot hide it: `next()`'s outcome is the chain's (OJS 7.5).
 */
export async function runEnqueueChain(
  middleware: readonly EnqueueMiddleware[],
  job: Job,
  headers: Record<string, HeaderValue> | undefined,
  publish: PublishStep,
): Promise<string> {
  if (middleware.length === 0) {
    await publish(job, headers);
    return job.id;
  }
  const step = async (index: number, current: OutgoingJob): Promise<string> => {
    if (index === middleware.length) {
      checkUnchanged(job, current);
      const { headers: outgoingHeaders, ...envelope } = current;
      await publish(envelope, outgoingHeaders);
      return job.id;
    }
    const own = middleware[index] as EnqueueMiddleware;
    let downstream: Promise<string> | undefined;
    const next = (replacement?: OutgoingJob): Promise<string> => {
      if (downstream !== undefined) {
        return Promise.reject(
          new StagecoachError('INVALID_REQUEST', `enqueue middleware ${middlewareName(own, index)} called next() twice`),
        );
      }
      downstream = step(index + 1, replacement ?? current);
      // Returned below when the middleware returns; when it throws instead, its error is the one
      // that counts, and this outcome must not crash the process as an unhandled rejection.
      downstream.catch(() => undefined);
      return downstream;
    };
    await own(current, next);
    if (downstream === undefined) {
      throw new EnqueueRefusedError(
        `enqueue middleware ${middlewareName(own, index)} returned without calling next(): job ${job.id} (${job.type}) for queue "${job.queue}" was not published`,
        job.queue,
        job.id,
      );
    }
    return downstream;
  };
  return step(0, { ...job, meta: { ...job.meta }, headers: { ...headers } });
}

/** What decides where a job goes and what it belongs to is not the middleware's to change. */
function checkUnchanged(original: Job, current: OutgoingJob): void {
  const changed: string[] = [];
  if (current.id !== original.id) changed.push('id');
  if (current.queue !== original.queue) changed.push('queue');
  if (current.tenant !== original.tenant) changed.push('tenant');
  if (current.meta?.batch !== original.meta.batch) changed.push('meta.batch');
  if (changed.length > 0) {
    throw new EnqueueRefusedError(
      `enqueue middleware changed ${changed.join(', ')} of job ${original.id} (${original.type}) for queue "${original.queue}": not published`,
      original.queue,
      original.id,
    );
  }
}
