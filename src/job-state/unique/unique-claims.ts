import type { UniqueState } from '../../job/job.types.js';
import { shownState, type JobRow } from '../job-lifecycle.js';

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

/** A key's claim as a store keeps it, with its holder's row (null: not folded yet). */
export interface HeldKey {
  job_id: string;
  /** Since the claim, by the store's clock. */
  age_ms: number;
  doc: JobRow | null;
  /** The holder was pruned (it ended long ago). */
  pruned: boolean | null;
}

/** Whether the key's holder still holds it for `request` (OJS 7.4: same key AND in `states` AND within `period`). */
export function decide(request: ClaimRequest, row: HeldKey): ClaimOutcome {
  // The same job again (a producer sending an envelope twice): it keeps its key.
  if (row.job_id === request.job) return { kind: 'claimed' };
  // A pruned holder ended long ago; one not folded yet was just enqueued.
  if (row.pruned === true) return { kind: 'claimed' };
  const state: UniqueState = row.doc === null ? 'available' : shownState(row.doc);
  const withinPeriod = request.periodMs === undefined || row.age_ms < request.periodMs;
  if (!withinPeriod || !request.states.includes(state)) return { kind: 'claimed' };
  const holder: Holder = {
    id: row.job_id,
    state,
    ...(state === 'scheduled' && row.doc?.scheduled_at !== undefined ? { scheduled_at: row.doc.scheduled_at } : {}),
  };
  // OJS 5.2: an active job is never replaced (its handler is running): the duplicate is refused.
  if (request.replace && state !== 'active') return { kind: 'replaced', holder };
  return { kind: 'held', holder };
}
