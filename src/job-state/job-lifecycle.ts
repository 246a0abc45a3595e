import type {
  CreatedReport,
  DirectiveRecord,
  ProgressRecord,
  SettledReport,
  SettlementOutcome,
} from '../tracking-stream/tracking-report.js';

/** The OJS lifecycle (src/job/job-states.ts): kept here too for the store's readers. */
export { JOB_STATES, type JobState } from '../job/job-states.js';
import type { JobState } from '../job/job-states.js';

/** The states a job ends in: retention applies to them, `job cancel` refuses them. */
export const ENDED_STATES: ReadonlySet<JobState> = new Set(['completed', 'cancelled', 'discarded']);

/** One failed attempt (OJS `errors` history). */
export interface AttemptError {
  attempt: number;
  type: string;
  message: string;
  at: string;
}

/**
 * What the job store keeps of one job: folded from every record about it (created, started,
 * settled, a `job cancel` directive) by {@link foldJob}. The state is the one set by the record
 * with the greatest {@link StateKey}, so the result does not depend on the order the records are
 * folded in, and a record folded twice changes nothing: duplicates and two trackers at once give
 * the same rows.
 */
export interface JobRow {
  id: string;
  state: JobState;
  /** What set `state`: [attempt it concerns, ISO time, rank] (see stateKey). */
  key: StateKey;
  /** The raw outcome behind `state` (`dead`, `suspect`, `retrying`...), or `created`. */
  outcome: SettlementOutcome | 'created';
  attempt: number;
  tenant?: string;
  queue?: string;
  type?: string;
  batch?: string;
  /** The job's `tags`, from its `created` report. */
  tags?: string[];
  /** The stage of the latest report. */
  stage?: string;
  parent_id?: string;
  children: string[];
  errors: AttemptError[];
  result?: unknown;
  created_at?: string;
  enqueued_at?: string;
  scheduled_at?: string;
  started_at?: string;
  completed_at?: string;
  cancelled_at?: string;
  /** `job cancel` was recorded: a stage meeting it discards it unrun. */
  cancel_requested?: string;
  /** ISO 8601: the store may drop it from then on (its queue's `retention` for its end state). */
  expires_at?: string;
  /** How far its latest reporting attempt got (`ctx.progress`), see foldProgress. */
  progress?: RowProgress;
}

/** A job's progress in the store: the highest fraction of its latest attempt, the latest message. */
export interface RowProgress {
  attempt: number;
  /** 0.0 to 1.0; null while only messages were reported. */
  value: number | null;
  message?: string;
  /** ISO 8601 of the latest report. */
  at: string;
}

/** [attempt, at, rank]: compared in that order; rank 0 waiting, 1 active, 2 ended. */
export type StateKey = [number, string, number];

/** A record the job store folds. */
export type JobRecord = CreatedReport | SettledReport | ProgressRecord | (DirectiveRecord & { job: string });

/** Milliseconds a job is kept once ended in `state` (its queue's retention), or undefined: kept. */
export type RetentionOf = (row: JobRow) => number | undefined;

export function compareKeys(a: StateKey, b: StateKey): number {
  if (a[0] !== b[0]) return a[0] - b[0];
  if (a[1] !== b[1]) return a[1] < b[1] ? -1 : 1;
  return a[2] - b[2];
}

/**
 * Whether a record names another tenant than the job it is about: a job's tenant is fixed by the
 * first record naming one, and a record of another tenant for the same id (a tenant's producer
 * may choose any id) is not this job's. Such a record changes nothing of the row, so no tenant
 * can settle, cancel, annotate or take over another tenant's job by reusing its id, and a read
 * confined to one tenant never shows what another reported. A record naming no tenant comes from
 * the operator or the internal user (the tracker takes no other, security.tenantUsers) and is
 * taken. A `job cancel` directive is the operator's and names no tenant.
 */
export function isForeignRecord(row: JobRow | undefined, record: JobRecord): boolean {
  if (row?.tenant === undefined || record.kind === 'directive') return false;
  return record.tenant !== undefined && record.tenant !== row.tenant;
}

/** The state a settlement outcome puts a job in, the attempt it concerns and its rank. */
function settledState(record: SettledReport): { state: JobState; attempt: number; rank: number } {
  switch (record.outcome) {
    case 'started':
      return { state: 'active', attempt: record.attempt, rank: 1 };
    case 'completed':
      return { state: 'completed', attempt: record.attempt, rank: 2 };
    case 'dead':
    case 'discarded':
      return { state: 'discarded', attempt: record.attempt, rank: 2 };
    case 'cancelled':
      return { state: 'cancelled', attempt: record.attempt, rank: 2 };
    case 'parked':
      return { state: 'pending', attempt: record.next_attempt ?? record.attempt, rank: 0 };
    case 'suspect':
      return { state: 'available', attempt: record.next_attempt ?? record.attempt + 1, rank: 0 };
    case 'retrying': {
      const next = record.next_attempt ?? record.attempt + 1;
      // The same attempt again: handed back unstarted, or rate-limited; not a failure.
      return { state: next > record.attempt ? 'retryable' : 'available', attempt: next, rank: 0 };
    }
  }
}

/** A row for a job only named so far (by a child list): `available`, below any record of its own. */
export function emptyRow(id: string): JobRow {
  return { id, state: 'available', key: [0, '', 0], outcome: 'created', attempt: 1, children: [], errors: [] };
}

/**
 * Folds one record into a job's row (a fresh one when undefined). Commutative and idempotent
 * (see JobRow) among the records of the job's own tenant: the state comes from the greatest key;
 * facts (children, errors per attempt, timestamps) are merged as sets or by min / max. A record
 * of another tenant than the one the row already names leaves the row as it is (isForeignRecord).
 *
 * Ordering within an attempt is by the reports' clocks: a hand-back and the next start of the
 * same attempt on another process are ordered by their hosts' clocks (docs/job-state.md).
 */
export function foldJob(existing: JobRow | undefined, record: JobRecord, retentionOf: RetentionOf): JobRow {
  // Another tenant's record for this id is not this job's (foreign-records.ts): the row stays as it is.
  if (existing !== undefined && isForeignRecord(existing, record)) return existing;
  const row: JobRow = existing === undefined ? emptyRow(record.job) : { ...existing };
  if (record.kind === 'directive') {
    row.cancel_requested = minTime(row.cancel_requested, record.at);
    return row;
  }
  if (record.kind === 'progress') {
    // A report naming another tenant than the job's is not this job's (tenant confinement).
    if (existing?.tenant === undefined || existing.tenant === record.tenant) row.progress = foldProgress(row.progress, record);
    return row;
  }
  if (record.tenant !== undefined) row.tenant ??= record.tenant;
  if (record.type !== undefined) row.type ??= record.type;
  if (record.batch !== undefined) row.batch ??= record.batch;
  if (record.kind === 'created') {
    // A child named by its parent's completion without its queue (a batched one) has queue ''.
    if (record.queue !== '') row.queue ??= record.queue;
    row.created_at = minTime(row.created_at, record.at);
    row.enqueued_at = minTime(row.enqueued_at, record.at);
    if (record.scheduled_at !== undefined) row.scheduled_at ??= record.scheduled_at;
    if (record.parent !== undefined) row.parent_id ??= record.parent;
    if (record.tags !== undefined && record.tags.length > 0) row.tags ??= record.tags;
    const key: StateKey = [0, record.at, 0];
    const waiting = record.pending === true ? 'pending' : record.scheduled_at === undefined ? 'available' : 'scheduled';
    if (compareKeys(key, row.key) > 0) setState(row, key, waiting, 'created');
    return row;
  }
  const { state, attempt, rank } = settledState(record);
  const key: StateKey = [attempt, record.at, rank];
  if (record.error !== undefined && record.outcome !== 'cancelled' && record.outcome !== 'parked') {
    addError(row, { attempt: record.attempt, type: record.error.type, message: record.error.message, at: record.at });
  }
  if (record.emitted !== undefined && record.emitted.length > 0) row.children = union(row.children, record.emitted);
  if (record.outcome === 'started') row.started_at = maxTime(row.started_at, record.at);
  if (compareKeys(key, row.key) > 0) {
    setState(row, key, state, record.outcome);
    row.attempt = attempt;
    row.queue = record.queue;
    row.stage = record.stage;
    if (record.outcome === 'completed') {
      row.completed_at = record.at;
      if (record.result !== undefined) row.result = record.result;
      else delete row.result;
    }
    if (record.outcome === 'cancelled') row.cancelled_at = record.at;
    if (rank === 2) {
      const ms = retentionOf(row);
      if (ms === undefined) delete row.expires_at;
      else row.expires_at = new Date(Date.parse(record.at) + ms).toISOString();
    } else delete row.expires_at;
  }
  row.created_at = minTime(row.created_at, record.at);
  return row;
}

/**
 * A progress report folded into the job's progress, commutatively: a later attempt's replaces an
 * earlier one's (spec/ojs-progress.md: non-decreasing within one execution); within an attempt
 * the highest fraction stands and the latest report's message (by time, then text) is shown.
 */
export function foldProgress(known: RowProgress | undefined, record: ProgressRecord): RowProgress {
  const mine: RowProgress = {
    attempt: record.attempt,
    value: record.progress,
    ...(record.message === undefined ? {} : { message: record.message }),
    at: record.at,
  };
  if (known === undefined || record.attempt > known.attempt) return mine;
  if (record.attempt < known.attempt) return known;
  const value = known.value === null ? mine.value : mine.value === null ? known.value : Math.max(known.value, mine.value);
  const later = mine.at > known.at || (mine.at === known.at && (mine.message ?? '') > (known.message ?? '')) ? mine : known;
  return { ...later, value };
}

/**
 * The rows a record names besides its own job: the children of a completion, `available` under
 * their parent (in the queue `emitted_to` names) until a record of their own says more.
 */
export function childRecords(record: JobRecord): CreatedReport[] {
  if (record.kind !== 'settled' || record.emitted === undefined) return [];
  return record.emitted.map((child, index) => ({
    kind: 'created',
    id: `${record.id}/${index}`,
    job: child,
    parent: record.job,
    queue: record.emitted_to?.[index] ?? '',
    ...(record.batch === undefined ? {} : { batch: record.batch }),
    ...(record.tenant === undefined ? {} : { tenant: record.tenant }),
    at: record.at,
  }));
}

/** The state shown: a scheduled job whose time has come is `available`; a waiting job with a recorded cancel is `cancelled`. */
export function shownState(row: JobRow, now: number = Date.now()): JobState {
  if (row.cancel_requested !== undefined && !ENDED_STATES.has(row.state) && row.state !== 'active') return 'cancelled';
  if (row.state === 'scheduled' && row.scheduled_at !== undefined && Date.parse(row.scheduled_at) <= now) return 'available';
  return row.state;
}

function setState(row: JobRow, key: StateKey, state: JobState, outcome: JobRow['outcome']): void {
  row.key = key;
  row.state = state;
  row.outcome = outcome;
}

function addError(row: JobRow, error: AttemptError): void {
  const others = row.errors.filter((known) => known.attempt !== error.attempt);
  const same = row.errors.find((known) => known.attempt === error.attempt);
  // One entry per attempt; of two reports of one attempt, the later stands (both trackers agree).
  const kept =
    same === undefined || same.at < error.at || (same.at === error.at && same.type + same.message < error.type + error.message)
      ? error
      : same;
  row.errors = [...others, kept].sort((a, b) => a.attempt - b.attempt);
}

function union(a: string[], b: string[]): string[] {
  const set = new Set(a);
  for (const id of b) set.add(id);
  return set.size === a.length ? a : [...set].sort();
}

function minTime(a: string | undefined, b: string): string {
  return a === undefined || b < a ? b : a;
}

function maxTime(a: string | undefined, b: string): string {
  return a === undefined || b > a ? b : a;
}
