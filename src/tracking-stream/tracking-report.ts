import type { BatchCallbacks } from '../job/job.types.js';
import type { WorkflowSpec } from '../job/workflow.types.js';
import { uuidv7 } from '../job/uuid-v7.js';

/**
 * What becomes of a tracked job (a batched one, or any job of a queue with `tracking` on) at one
 * settlement (docs/batches.md, docs/job-state.md):
 * - `started`: its handler is about to run (OJS `active`); not a settlement: reported without
 *   waiting for its confirm, and ignored by the batch fold;
 * - `completed`: the handler returned and its emits were confirmed (final);
 * - `retrying`: it comes back at `next_attempt` (a retry, or a hand-back after its publisher
 *   channel was lost under an emit, at the same attempt);
 * - `suspect`: redelivered after a crash, moved to run alone at `next_attempt`;
 * - `dead`: dead-lettered (final, a failure);
 * - `discarded`: dropped by its retry policy (`on_exhaustion: discard`; final, a failure);
 * - `cancelled`: its batch was cancelled and a stage met it before it ran (final, not a failure);
 * - `parked`: its batch or tenant is paused; it waits unrun in the parked queue and runs at
 *   `next_attempt` (the same attempt) once resumed.
 */
export type SettlementOutcome = 'started' | 'completed' | 'retrying' | 'suspect' | 'dead' | 'discarded' | 'cancelled' | 'parked';

export const FINAL_OUTCOMES: ReadonlySet<SettlementOutcome> = new Set(['completed', 'dead', 'discarded', 'cancelled']);

/** One settlement of one tracked job, as a stage reports it before acknowledging the delivery. */
export interface SettledReport {
  kind: 'settled';
  /** Unique per settlement: an exact duplicate (a report published again) is recognised by it. */
  id: string;
  job: string;
  /** Its batch; absent for a job tracked by its queue's `tracking` only. */
  batch?: string;
  tenant?: string;
  stage: string;
  /** The logical queue it was read from. */
  queue: string;
  /** The job's `type`. */
  type?: string;
  outcome: SettlementOutcome;
  attempt: number;
  /** The attempt it runs at next, for `retrying` and `suspect`. */
  next_attempt?: number;
  error?: { type: string; message: string };
  /** Ids of the jobs it emitted (`completed` only). */
  emitted?: string[];
  /** The logical queue of each of `emitted`, in the same order (tracked unbatched jobs). */
  emitted_to?: string[];
  /** What the handler returned (`completed` only, when it returned something; spec/ojs-results.md). */
  result?: unknown;
  /**
   * The id of an earlier `completed` report of this delivery that is void: it was published
   * beside the emits (in the same confirm wait) and an emit then failed, so the job did not
   * complete. `unsent` lists the emitted ids of that report that were not confirmed.
   */
  retracts?: string;
  unsent?: string[];
  /** ISO 8601. */
  at: string;
}

/**
 * A job published by `Publisher` (or `publish`) into a batch or a tracked queue, reported before
 * it is published.
 */
export interface CreatedReport {
  kind: 'created';
  id: string;
  job: string;
  batch?: string;
  /** ISO 8601, when the job was published scheduled. */
  scheduled_at?: string;
  /** The job that emitted it. */
  parent?: string;
  tenant?: string;
  queue: string;
  type?: string;
  /** The batch's callbacks, when this root declares them (checked by the publisher; see batch-callbacks.ts). */
  callbacks?: BatchCallbacks;
  /** The job's `tags`, kept by the job store. */
  tags?: string[];
  /** Held until activated (OJS `pending`); a later `created` report without it says it was activated. */
  pending?: boolean;
  at: string;
}

/** A tracker announced `batch.completed`: a replay does not announce it again. */
export interface AnnouncedReport {
  kind: 'announced';
  id: string;
  batch: string;
  /** The batch's tenant (a batch is its tenant's and its id's); none: the batch of that id of no tenant, or every one of that id. */
  tenant?: string;
  at: string;
}

/**
 * An operator's directive about a batch (`batch cancel|pause|resume`) or a tenant (`tenant
 * pause|resume`), recorded after its marker was set (src/directives/batch-directives.ts): status shows
 * it, and a cancelled batch completes as `cancelled`. The markers, not these records, are what
 * stages obey.
 */
export interface DirectiveRecord {
  kind: 'directive';
  id: string;
  action: 'cancel' | 'pause' | 'resume';
  batch?: string;
  tenant?: string;
  /** `job cancel <id>` (action `cancel`; docs/job-state.md). */
  job?: string;
  at: string;
}

/**
 * A workflow started (docs/workflows.md): its definition, as checked, and the id of every job it
 * may publish, written before any of them is. The workflow is a batch (`workflow` is its batch
 * id): the batch knows its jobs from this record, in flight until each settles or is cancelled,
 * so it cannot complete between two steps. Where the definition lives: here only, as a batch's
 * callbacks live in its root's `created` report; a tracker learns it on replay.
 */
export interface WorkflowRecord {
  kind: 'workflow';
  id: string;
  /** The workflow's id, which is also its batch's. */
  workflow: string;
  tenant?: string;
  definition: WorkflowSpec;
  /** Every job id of its steps and callbacks, derived from the workflow id and the step (workflow-plan.ts). */
  jobs: string[];
  /** The job whose handler started it (`ctx.emit`). */
  parent?: string;
  /** The W3C traceparent its steps continue. */
  traceparent?: string;
  at: string;
}

/**
 * How far a running job got (`ctx.progress`, spec/ojs-progress.md): information, not a
 * settlement. Published unconfirmed and throttled by the stage (at most one a second per job);
 * the job store keeps the highest fraction of the latest attempt (docs/job-state.md).
 */
export interface ProgressRecord {
  kind: 'progress';
  id: string;
  job: string;
  tenant?: string;
  stage: string;
  queue: string;
  attempt: number;
  /** 0.0 to 1.0; null when the handler reported a message only. */
  progress: number | null;
  message?: string;
  at: string;
}

/** Written by a reader to know when it has read everything before it (replay to the present). */
export interface MarkReport {
  kind: 'mark';
  id: string;
  at: string;
}

export type TrackingRecord =
  SettledReport | CreatedReport | AnnouncedReport | DirectiveRecord | WorkflowRecord | ProgressRecord | MarkReport;

/**
 * Several settlement reports of one stage in one stream message (AMQP `type`
 * `tracking.settled-group`), written compactly: not a record of its own but a container,
 * expanded by parseRecords into one `settled` record per entry of `reports`, in order. Entry
 * `i` is `{ id: '<id>:<i>', at, ...common, ...reports[i], kind: 'settled' }`: the fields every
 * report of the group shares are written once in `common`, and a report's own `id` and `at`
 * only when they are not the derived ones. `<id>` is a UUIDv7 per group, so `<id>:<i>` is
 * unique per settlement as a report id must be.
 */
export interface SettledGroup {
  kind: 'settled-group';
  id: string;
  /** ISO 8601: when the group was started (its reports were made within one event-loop turn). */
  at: string;
  common: Partial<SettledReport>;
  reports: Array<Partial<SettledReport>>;
}

/** The id of the `index`-th report of the group `group` (see SettledGroup). */
export function groupReportId(group: string, index: number): string {
  return `${group}:${index}`;
}

/** AMQP `content_type` of every record on the tracking stream. */
export const TRACKING_CONTENT_TYPE = 'application/json';

/** A record with its `id` and `at` filled in. */
export function stamp<R extends TrackingRecord>(record: Omit<R, 'id' | 'at'>): R {
  return { ...record, id: uuidv7(), at: new Date().toISOString() } as R;
}

/** A record read back from the stream, or undefined when it is not one (skipped, never fatal). */
export function parseRecord(content: Buffer): TrackingRecord | undefined {
  let body: unknown;
  try {
    body = JSON.parse(content.toString('utf8'));
  } catch {
    return undefined;
  }
  return recordOf(body);
}

/**
 * The records of one stream message: one record (a JSON object), the settlement reports of one
 * stage's event-loop turn published together (a SettledGroup), or, as earlier versions wrote
 * them, several records in a JSON array. What is not a record is skipped, never fatal.
 */
export function parseRecords(content: Buffer): TrackingRecord[] {
  let body: unknown;
  try {
    body = JSON.parse(content.toString('utf8'));
  } catch {
    return [];
  }
  const records = Array.isArray(body) ? body.map(recordOf) : isGroup(body) ? expandGroup(body) : [recordOf(body)];
  return records.filter((record): record is TrackingRecord => record !== undefined);
}

function isGroup(body: unknown): body is SettledGroup {
  if (typeof body !== 'object' || body === null) return false;
  const group = body as Partial<SettledGroup>;
  return (
    group.kind === 'settled-group' &&
    typeof group.id === 'string' &&
    typeof group.at === 'string' &&
    typeof group.common === 'object' &&
    group.common !== null &&
    Array.isArray(group.reports)
  );
}

/** The group's reports as records (see SettledGroup); an entry that is not an object is skipped. */
function expandGroup(group: SettledGroup): Array<TrackingRecord | undefined> {
  const { id, at, common } = group;
  return group.reports.map((report, index) =>
    typeof report === 'object' && report !== null && !Array.isArray(report)
      ? recordOf({ id: groupReportId(id, index), at, ...common, ...report, kind: 'settled' })
      : undefined,
  );
}

function recordOf(body: unknown): TrackingRecord | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const record = body as Partial<TrackingRecord> & Record<string, unknown>;
  if (typeof record.id !== 'string') return undefined;
  switch (record.kind) {
    case 'settled':
      return typeof record.job === 'string' &&
        (record.batch === undefined || typeof record.batch === 'string') &&
        typeof record.outcome === 'string' &&
        typeof record.attempt === 'number'
        ? (record as SettledReport)
        : undefined;
    case 'created':
      return typeof record.job === 'string' && (record.batch === undefined || typeof record.batch === 'string')
        ? (record as CreatedReport)
        : undefined;
    case 'announced':
      return typeof record.batch === 'string' ? (record as AnnouncedReport) : undefined;
    case 'directive':
      return (record.action === 'cancel' || record.action === 'pause' || record.action === 'resume') &&
        (typeof record.batch === 'string' || typeof record.tenant === 'string' || typeof record.job === 'string')
        ? (record as DirectiveRecord)
        : undefined;
    case 'workflow':
      return typeof record.workflow === 'string' &&
        typeof record.definition === 'object' &&
        record.definition !== null &&
        Array.isArray(record.jobs) &&
        record.jobs.every((job) => typeof job === 'string')
        ? (record as WorkflowRecord)
        : undefined;
    case 'progress':
      return typeof record.job === 'string' &&
        typeof record.attempt === 'number' &&
        (record.progress === null || typeof record.progress === 'number')
        ? (record as ProgressRecord)
        : undefined;
    case 'mark':
      return record as MarkReport;
    default:
      return undefined;
  }
}
