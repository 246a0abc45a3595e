import { EnqueueRefusedError, StagecoachError } from '../../errors/errors.js';
import type { HeaderValue, Job } from '../../job/job.types.js';
import { middlewareName } from './middleware-name.js';
import type { EnqueueMiddleware, OutgoingJob } from './middleware.types.js';

/**
 * The end of the chain: publishes the (possibly changed) envelope with its headers. Resolves with
 * nothing, or with the id of another job that stands for this one, unpublished (a unique job's
 * `on_conflict: "ignore"`, docs/unique-jobs.md).
 */
export type PublishStep = (job: Job, headers: Record<string, HeaderValue> | undefined) => Promise<void | string>;

/**
 * Runs `middleware` in order around `publish` (OJS linear chain) and resolves with the job's id
 * once it was published (or the id `publish` answered in its place). Without middleware, `publish` alone.
 *
 * The chain works on `job` itself, not a copy (callers hand it a job they just built; a copy
 * costs more than the rest of the chain): the headers ride on it as a non-enumerable `headers`
 * property, which no envelope serialisation sees, so what reaches `publish` is the object the
 * middleware changed, unless one passed a replacement to `next()`.
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
  if (middleware.length === 0) return (await publish(job, headers)) ?? job.id;
  const decided = { id: job.id, queue: job.queue, tenant: job.tenant, batch: job.meta.batch, type: job.type };
  const step = async (index: number, current: OutgoingJob): Promise<string> => {
    if (index === middleware.length) {
      checkUnchanged(decided, current);
      return (await publish(envelopeOf(current), current.headers)) ?? decided.id;
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
        `enqueue middleware ${middlewareName(own, index)} returned without calling next(): job ${decided.id} (${decided.type}) for queue "${decided.queue}" was not published`,
        decided.queue,
        decided.id,
      );
    }
    return downstream;
  };
  const outgoing = job as OutgoingJob;
  Object.defineProperty(outgoing, 'headers', { value: { ...headers }, writable: true, enumerable: false, configurable: true });
  return step(0, outgoing);
}

/** The envelope to publish: the job itself, unless a replacement given to `next()` carries `headers` as a field. */
function envelopeOf(current: OutgoingJob): Job {
  if (!Object.prototype.propertyIsEnumerable.call(current, 'headers')) return current;
  // eslint-disable-next-line @typescript-eslint/no-unused-vars -- taken out of the envelope
  const { headers, ...envelope } = current;
  return envelope;
}

/** What decides where a job goes and what it belongs to is not the middleware's to change. */
function checkUnchanged(original: Pick<Job, 'id' | 'queue' | 'tenant' | 'type'> & { batch: unknown }, current: OutgoingJob): void {
  const changed: string[] = [];
  if (current.id !== original.id) changed.push('id');
  if (current.queue !== original.queue) changed.push('queue');
  if (current.tenant !== original.tenant) changed.push('tenant');
  if (current.meta?.batch !== original.batch) changed.push('meta.batch');
  if (changed.length > 0) {
    throw new EnqueueRefusedError(
      `enqueue middleware changed ${changed.join(', ')} of job ${original.id} (${original.type}) for queue "${original.queue}": not published`,
      original.queue,
      original.id,
    );
  }
}
