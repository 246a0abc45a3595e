import { StagecoachError } from '../../errors/errors.js';
import type { Job } from '../../job/job.types.js';
import type { StageContext, StageHandler } from '../stage.types.js';
import { middlewareName } from './middleware-name.js';
import type { ExecutionMiddleware } from './middleware.types.js';

/**
 * The handler wrapped in `middleware`, the first outermost (OJS nested chain). Composed once per
 * handler, not per job; without middleware the handler itself, so a stage without any pays
 * nothing. Each job gets its own `next` functions: calling one twice rejects, since running the
 * handler twice for one delivery would emit its jobs twice.
 */
export function withExecutionMiddleware(handler: StageHandler, middleware: readonly ExecutionMiddleware[]): StageHandler {
  if (middleware.length === 0) return handler;
  const chain = [...middleware];
  return { handle: (job, ctx) => runChain(chain, handler, job, ctx) };
}

function runChain(chain: readonly ExecutionMiddleware[], handler: StageHandler, job: Job, ctx: StageContext): Promise<unknown> {
  const step = (index: number): Promise<unknown> => {
    // A handler that throws synchronously rejects here, like an async one.
    if (index === chain.length) return Promise.resolve().then(() => handler.handle(job, ctx));
    const middleware = chain[index] as ExecutionMiddleware;
    let called = false;
    const next = (): Promise<unknown> => {
      if (called) {
        return Promise.reject(
          new StagecoachError('INVALID_REQUEST', `execution middleware ${middlewareName(middleware, index)} called next() twice`),
        );
      }
      called = true;
      return step(index + 1);
    };
    return Promise.resolve().then(() => middleware(job, ctx, next));
  };
  return step(0);
}
