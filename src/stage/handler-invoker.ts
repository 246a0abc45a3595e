import { StagecoachError } from '../errors/errors.js';
import type { Job } from '../job/job.types.js';
import type { JobContext } from './job-context.js';
import type { StageHandler } from './stage.types.js';

/**
 * Runs `handle()` for one job. With a timeout (seconds), the job's `ctx.signal` is aborted when
 * it runs out and the call fails with HANDLER_TIMEOUT; the context then refuses further emits.
 * The same when the delivery is lost (its channel died; `ctx.lossSignal`): the signal aborts and
 * the call fails with the DeliveryLostError. A handler that ignores the signal keeps running,
 * but its late result is dropped. Without a timeout no AbortController is made here: most jobs
 * have none, and this is the hot path; the context then makes one for a handler that reads
 * `ctx.signal`, aborted on loss, and a loss refuses its emits all the same.
 */
export async function invokeHandler(
  handler: StageHandler,
  job: Job,
  ctx: JobContext,
  timeoutSeconds: number | undefined,
): Promise<JobContext> {
  if (timeoutSeconds === undefined) {
    ctx.result = await handler.handle(job, ctx);
    return ctx;
  }
  const controller = new AbortController();
  ctx.useSignal(controller.signal);
  const handled = Promise.resolve().then(async () => {
    ctx.result = await handler.handle(job, ctx);
  });
  let timer: NodeJS.Timeout | undefined;
  let unlink = (): void => undefined;
  const ended = new Promise<never>((_, reject) => {
    const end = (error: Error): void => {
      ctx.close();
      controller.abort(error);
      reject(error);
    };
    timer = setTimeout(
      () => end(new StagecoachError('HANDLER_TIMEOUT', `handler ran past its timeout of ${timeoutSeconds} s`)),
      timeoutSeconds * 1000,
    );
    const lost = ctx.lossSignal;
    if (lost === undefined) return;
    if (lost.aborted) {
      end(lost.reason as Error);
      return;
    }
    const onLost = (): void => end(lost.reason as Error);
    lost.addEventListener('abort', onLost, { once: true });
    unlink = () => lost.removeEventListener('abort', onLost);
  });
  handled.catch(() => undefined);
  try {
    await Promise.race([handled, ended]);
  } finally {
    clearTimeout(timer);
    unlink();
  }
  return ctx;
}
