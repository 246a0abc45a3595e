import type { MemoryJobStore } from '../memory-job-store.js';
import { decide, type ClaimOutcome, type ClaimRequest, type UniqueClaims } from './unique-claims.js';

/**
 * Uniqueness claims with the memory job store (docs/unique-jobs.md): keys in a Map of the store
 * that folds the tracking stream in this process (`stagecoach admin`'s follower), so a holder's
 * state is read where it is kept. They hold for the producers of this one process only (its
 * HTTP pushes) and are lost with it: development and the conformance suite, not production.
 *
 * A claim is atomic without a lock: once the store is up to date (the await), it reads the
 * holder and takes the key in one turn of the event loop.
 */
export class MemoryUniqueClaims implements UniqueClaims {
  /** @param store the process's store, read up to the stream's head (the follower's `jobs()`). */
  constructor(private readonly store: () => Promise<MemoryJobStore>) {}

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    const store = await this.store();
    const now = Date.now();
    const held = store.uniqueKeys.get(request.key);
    const outcome: ClaimOutcome =
      held === undefined
        ? { kind: 'claimed' }
        : decide(request, {
            job_id: held.job,
            age_ms: now - held.claimedAt,
            doc: store.row(held.job) ?? null,
            pruned: store.wasPruned(held.job),
          });
    if (outcome.kind !== 'held' && held?.job !== request.job) store.uniqueKeys.set(request.key, { job: request.job, claimedAt: now });
    return outcome;
  }

  async release(key: string, job: string): Promise<void> {
    const store = await this.store();
    if (store.uniqueKeys.get(key)?.job === job) store.uniqueKeys.delete(key);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
