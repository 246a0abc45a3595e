import { StagecoachError } from '../errors/errors.js';
import type { Job } from '../job/job.types.js';
import type { JobContext } from './job-context.js';
import type { StageHandler } from './stage.types.js';

/**
 * Runs `handle()` for one job. With a timeout (seconds), the job's `ctx.signal` is aborted when
 * it runs out and the call fails with HANDLER_TIMEOUT; the context then refuses further emits.
 * A handler that ignores the signal keeps running, but its late result is dropped. Without a
 * timeout no AbortController is made: most jobs have none, and this is the hot path.
 */
export async function invokeHandler(
  handler: StageHandler,
  job: Job,
  ctx: JobContext,
  timeoutSeconds: number | undefined,
): Promise<JobContext> {
  if (timeoutSeconds === undefined) {
    await handler.handle(job, ctx);
    return ctx;
  }
  const controller = new AbortController();
  ctx.useSignal(controller.signal);
  const handled = Promise.resolve().then(() => handler.handle(job, ctx));
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new StagecoachError('HANDLER_TIMEOUT', `handler ran past its timeout of ${timeoutSeconds} s`);
      ctx.close();
      controller.abort(error);
      reject(error);
    }, timeoutSeconds * 1000);
  });
  handled.catch(() => undefined);
  try {
    await Promise.race([handled, timedOut]);
  } finally {
    clearTimeout(timer);
  }
  return ctx;
}
