/**
 * Where job arguments above `payloads.threshold` bytes are kept while their job travels by
 * reference (docs/payloads.md): a claim check. One small interface, so that a user can put an
 * object store behind it; stagecoach ships a filesystem store (the embedded default) and a
 * PostgreSQL store.
 *
 * Lifecycle of one payload, which the framework drives (implementations only store):
 * 1. `put` (state `pending`) before the job that references it is published;
 * 2. `commit` once the broker confirmed that job: from here on only the consuming stage deletes it;
 * 3. `delete` once no job that references it can run again (its job settled for good and
 *    acknowledged; kept while it is retried, dead-lettered or parked).
 * A payload still `pending` after `payloads.orphan_after` is an orphan (a crash between storing
 * and publishing): the sweep deletes it. A committed one is swept only after
 * `payloads.retention`, which must outlast the longest a job can wait (dead letters included).
 *
 * Payloads are namespaced by tenant (`_` for a job without one): a reference names its tenant,
 * and a stage reads only references of the tenant whose queue it consumes (PayloadRefs).
 */
export interface PayloadStore {
  /** Stores `data` under `ref` as `pending`. Overwrites nothing: a ref is new (a UUID). */
  put(ref: PayloadKey, data: Buffer): Promise<void>;
  /** Marks a stored payload as referenced by a published job. No-op when it is gone. */
  commit(ref: PayloadKey): Promise<void>;
  /** The bytes, or undefined when no payload is stored under `ref` (never throws for a missing one). */
  get(ref: PayloadKey): Promise<Buffer | undefined>;
  /**
   * Whether a payload is stored under `ref`, pending or committed, without reading it (`dead list`
   * and the dashboard ask this of every dead letter). Optional: a store without it is asked `get`.
   */
  has?(ref: PayloadKey): Promise<boolean>;
  /** Deletes it; no-op when it is gone already. */
  delete(ref: PayloadKey): Promise<void>;
  /**
   * Deletes payloads still `pending` stored before `pendingBefore`, and any stored before
   * `anyBefore`. @returns how many were deleted.
   */
  sweep(pendingBefore: Date, anyBefore: Date): Promise<number>;
  /** How many payloads are stored (tests, metrics); per tenant when given. */
  count(tenant?: string): Promise<number>;
  close(): Promise<void>;
}

/** One payload's address: its tenant (`_` for none) and its id (a UUID). */
export interface PayloadKey {
  tenant: string;
  id: string;
}
