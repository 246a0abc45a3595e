/**
 * Runs `work` on every item with at most `limit` running at once, in `limit` lanes that each take
 * the next item when their last one is done (a slow item holds up one lane, not a batch). The
 * first failure stops every lane from taking more and is thrown once the running ones settle:
 * nothing keeps going behind the caller's back.
 *
 * @param work gets the item and the lane number (0 .. limit-1), so a lane can keep a resource
 *   of its own, such as a channel, for the items it takes.
 */
export async function inParallel<T>(items: readonly T[], limit: number, work: (item: T, lane: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const lane = async (index: number): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  const lanes = Math.max(1, Math.min(Math.floor(limit), items.length));
  await Promise.all(Array.from({ length: lanes }, (_, index) => lane(index)));
  if (failure !== undefined) throw failure.error;
}
