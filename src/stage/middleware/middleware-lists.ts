import type { Middleware, StageMiddleware } from './middleware.types.js';

/**
 * Middleware as given (to `@Stage`, `StageGroup`, `Publisher`), checked and copied once: every
 * entry must be a function, and the frozen copy never changes while jobs run through it, whatever
 * the caller does with its arrays later (OJS middleware 5.3).
 * @param owner how the error names the place, e.g. `@Stage "converter"`
 * @throws TypeError naming the owner and the entry that is not a function
 */
export function middlewareLists(owner: string, middleware: Middleware | undefined): StageMiddleware {
  const lists = { enqueue: [...(middleware?.enqueue ?? [])], execution: [...(middleware?.execution ?? [])] };
  for (const [chain, list] of Object.entries(lists)) {
    list.forEach((entry: unknown, index) => {
      if (typeof entry !== 'function')
        throw new TypeError(`${owner}: middleware.${chain}[${index}] must be a function, got ${typeof entry}`);
    });
  }
  return Object.freeze({ enqueue: Object.freeze(lists.enqueue), execution: Object.freeze(lists.execution) });
}
