/**
 * `work`'s result, or `undefined` when `ms` pass first (`work` goes on, unobserved: a rejection
 * after the bound is swallowed). For steps whose answer may never come (a broker that stopped
 * reading), so that a caller bounded in time stays bounded.
 */
export async function settleWithin<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  work.catch(() => undefined);
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), Math.max(0, ms))));
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
