import type { UniqueState } from '../../job/job.types.js';

/** What a job asks of the claims: its key held for it, under its policy (see UniqueClaims.claim). */
export interface ClaimRequest {
  key: string;
  job: string;
  tenant: string | undefined;
  /** The window, from the holder's claim; undefined: none. */
  periodMs: number | undefined;
  /** States of the holder in which the key stays held. */
  states: readonly UniqueState[];
  /** Take the key over from a holder that has not started (on_conflict `replace*`). */
  replace: boolean;
}

/** The job that held the key, as the job store shows it (`available` while the store has no row of it yet). */
export interface Holder {
  id: string;
  state: UniqueState;
  /** Its `scheduled_at`, while it is `scheduled`. */
  scheduled_at?: string;
}

export type ClaimOutcome =
  /** The key is the job's: publish it. */
  | { kind: 'claimed' }
  /** The key is the job's, taken from `holder`, which must now be cancelled. */
  | { kind: 'replaced'; holder: Holder }
  /** The key is held by `holder`: the job is a duplicate. */
  | { kind: 'held'; holder: Holder };

/**
 * Uniqueness keys and the job holding each (docs/unique-jobs.md). A claim is atomic: of two jobs
 * claiming one key at once, exactly one gets it (OJS "strong" uniqueness for `reject`/`ignore`).
 */
export interface UniqueClaims {
  claim(request: ClaimRequest): Promise<ClaimOutcome>;
  /** Gives the key up if `job` still holds it (its publish failed): best effort. */
  release(key: string, job: string): Promise<void>;
  close(): Promise<void>;
}
