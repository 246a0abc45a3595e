import type { BatchCallbacks } from '../job/job.types.js';
import {
  FINAL_OUTCOMES,
  type SettledReport,
  type SettlementOutcome,
  type TrackingRecord,
  type WorkflowRecord,
} from '../tracking-stream/tracking-report.js';
import { batchKey } from './batch-key.js';

/** A `created` or `settled` record of a batched job. */
type BatchedRecord = Extract<TrackingRecord, { kind: 'created' | 'settled' }> & { batch: string };

/** Where a job of a batch stands, derived from every report about it (see {@link BatchFold}). */
export type JobClass = 'in_flight' | 'completed' | 'dead' | 'discarded' | 'cancelled' | 'withdrawn';

/** What the fold knows of one job. */
export interface TrackedJob {
  id: string;
  batch: string;
  /** Where its batch is kept (batchKey: its tenant's and its id's). */
  batchKey: string;
  tenant?: string;
  type?: string;
  /** The logical queue it was created in or last settled from. */
  queue?: string;
  /** The job that emitted it. */
  parent?: string;
  /** Reported as created by its publisher (a root job). */
  created: boolean;
  /** Ids of the jobs its settlements emitted (every run's: a re-run's children are real work too). */
  children: Set<string>;
  /** Listed as emitted, then as not sent by a retraction: it never reached the broker, unless it reports itself. */
  unsent: boolean;
  /** Its settlement reports in stream order, exact duplicates dropped. */
  reports: SettledReport[];
  /** Report ids a later report retracted (their outcome is void; their emitted ids stay known). */
  retracted: Set<string>;
  /** Derived: see {@link classify}. */
  cls: JobClass;
  /** Derived: the first final outcome that stands, and whether another final outcome contradicts it. */
  final?: SettledReport;
  conflict: boolean;
  /**
   * In a workflow's batch: the step job it descends from (its own id for a step), whose subtree
   * it is counted in (TrackedBatch.lineages). Undefined elsewhere, and for a job reported before
   * its parent named it (counted once the parent does).
   */
  lineage?: string;
}

/** The counts of a batch (docs/batches.md "Status": `batch status --json` `jobs`, plus `discarded`). */
export interface BatchCounts {
  known: number;
  completed: number;
  /** Jobs that ended in failure: `dead` + `discarded`. */
  failed: number;
  dead: number;
  discarded: number;
  /** Jobs a stage met after `batch cancel` and discarded unrun (not failures). */
  cancelled: number;
  in_flight: number;
}

export interface TrackedBatch {
  id: string;
  /** The tenant it belongs to: a batch is its tenant's and its id's (batch-key.ts). */
  tenant?: string;
  /** batchKey(tenant, id): where the fold keeps it. */
  key: string;
  counts: BatchCounts;
  /** A tracker announced `batch.completed` for it (an `announced` record was read). */
  announced: boolean;
  /** `batch cancel` was recorded: it completes as `cancelled` once nothing of it is in flight. */
  cancelled: boolean;
  /** `batch pause` was recorded and no `resume` since: its jobs are parked where stages meet them. */
  paused: boolean;
  /** Reports refused because they named a job of another tenant than theirs (a job's tenant is its first record's). */
  refused: number;
  /** Jobs with two different final outcomes (the first stands; see docs/batches.md). */
  conflicts: number;
  /**
   * The callbacks its roots declared (in their `created` reports): per name, the first
   * declaration stands. The tracker publishes them when it announces the batch.
   */
  callbacks?: BatchCallbacks;
  /** ISO 8601 of the first and the latest record about it. */
  first_seen: string;
  last_seen: string;
  /**
   * A workflow's batch (docs/workflows.md): the counts of each step's subtree (the step's job and
   * every job emitted downstream of it), by the step's job id. A step has ended when its job has
   * and nothing of its subtree is in flight.
   */
  lineages?: Map<string, BatchCounts>;
}

/** A batch is complete when it knows a job and every job it knows has a final outcome. */
export function isComplete(batch: TrackedBatch): boolean {
  return batch.counts.known > 0 && batch.counts.in_flight === 0;
}

/** What applying one record changed that a tracker acts on. */
export interface FoldResult {
  /** The batch became complete with this record (it was not complete before it). */
  completed?: TrackedBatch;
  /** The record was refused (it names another tenant's job), with the reason. */
  refused?: string;
  /** The batch the record was about, when it changed something of it (a workflow is re-evaluated on it). */
  batch?: TrackedBatch;
}

/**
 * Folds tracking records (created, settled, announced) into per-batch state, in stream order.
 * Pure and synchronous: the tracker and the status commands feed it; unit tests drive it.
 *
 * State is keyed by job id and derived from the set of reports about each job, so a duplicate
 * (the same report twice: a crash between report and ack, a stream read twice) changes nothing,
 * and a job that ran twice adds the children of both runs. A job is settled when a final report
 * (`completed`, `dead`, `discarded`) stands for it and no later non-final report (`retrying`,
 * `suspect`) promises a further attempt beyond the highest settled one; the first final outcome
 * that stands is the job's outcome, a later different one is counted as a conflict.
 */
export class BatchFold {
  readonly jobs = new Map<string, TrackedJob>();
  /** By batchKey (tenant and id). */
  readonly batches = new Map<string, TrackedBatch>();
  private readonly named = new Map<string, TrackedBatch[]>();

  /** The batch `id` of `tenant`; without one (the operator's view), that of no tenant, else the first seen. */
  batch(id: string, tenant?: string): TrackedBatch | undefined {
    if (tenant !== undefined) return this.batches.get(batchKey(tenant, id));
    return this.batches.get(id) ?? this.named.get(id)?.[0];
  }

  /** Every batch of `id` (one per tenant), first seen first. */
  batchesNamed(id: string): readonly TrackedBatch[] {
    return this.named.get(id) ?? [];
  }

  apply(record: TrackingRecord): FoldResult {
    switch (record.kind) {
      case 'mark':
      case 'progress':
        // Progress is the job store's (src/job-state): it settles nothing.
        return {};
      case 'directive': {
        // A tenant's directives are for stages only; a batch's show in its state.
        if (record.batch === undefined) return {};
        // The operator's directive naming no tenant is every batch of that id's, as its flag is
        // for the stages (batch-directives.ts).
        let changed: TrackedBatch | undefined;
        for (const batch of this.directed(record.batch, record.tenant, record.at)) {
          batch.last_seen = record.at;
          if (record.action === 'cancel') {
            batch.cancelled = true;
            batch.paused = false;
          } else batch.paused = record.action === 'pause' && !batch.cancelled;
          changed ??= batch;
        }
        return changed === undefined ? {} : { batch: changed };
      }
      case 'announced': {
        for (const batch of this.directed(record.batch, record.tenant, record.at)) batch.announced = true;
        return {};
      }
      case 'workflow':
        return this.applyWorkflow(record);
      case 'created':
      case 'settled':
        // Jobs outside a batch, and `started` (not a settlement), are the job store's (src/job-state).
        if (record.batch === undefined || (record.kind === 'settled' && record.outcome === 'started')) return {};
        return this.applyJobRecord(record as BatchedRecord);
    }
  }

  /**
   * A workflow's definition: its batch knows every job it may publish, in flight until each
   * settles or is cancelled, each counted in its own lineage. A second definition under the same
   * id changes nothing (the first stands: a workflow started again, a record read twice).
   */
  private applyWorkflow(record: WorkflowRecord): FoldResult {
    const batch = this.batchOf(record.workflow, record.tenant, record.at);
    if (batch.lineages !== undefined) return {};
    const wasComplete = isComplete(batch);
    batch.lineages = new Map();
    batch.last_seen = record.at;
    for (const id of record.jobs) {
      if (this.foreign(id, record.tenant)) {
        batch.refused++;
        continue;
      }
      const job = this.jobOf(id, batch);
      job.tenant ??= record.tenant;
      if (job.lineage === undefined) this.attribute(job, id, batch);
      this.reclassify(job, batch);
    }
    return !wasComplete && isComplete(batch) ? { completed: batch, batch } : { batch };
  }

  /**
   * Whether job `id` is another tenant's than `tenant`: a job is its first reported tenant's (a
   * tenant's producer chooses ids). A record naming no tenant is the operator's or the internal user's.
   */
  private foreign(id: string, tenant: string | undefined): boolean {
    const known = this.jobs.get(id)?.tenant;
    return known !== undefined && tenant !== undefined && tenant !== known;
  }

  /** The batches a record naming `id` is about: its tenant's, else every one of that id (or a new one of no tenant). */
  private directed(id: string, tenant: string | undefined, at: string): readonly TrackedBatch[] {
    if (tenant !== undefined) return [this.batchOf(id, tenant, at)];
    const named = this.named.get(id);
    return named !== undefined && named.length > 0 ? named : [this.batchOf(id, undefined, at)];
  }

  private applyJobRecord(record: BatchedRecord): FoldResult {
    const batch = this.batchOf(record.batch, record.tenant, record.at);
    if (this.foreign(record.job, record.tenant)) {
      batch.refused++;
      return { refused: `job "${record.job}" is another tenant's than "${record.tenant as string}"` };
    }
    const wasComplete = isComplete(batch);
    batch.last_seen = record.at;
    const job = this.jobOf(record.job, batch);
    job.tenant ??= record.tenant;
    job.type ??= record.type;
    job.queue = record.queue;
    if (record.kind === 'created') {
      job.created = true;
      // Per name the first declaration stands (a second root naming another on_success is ignored).
      if (record.callbacks !== undefined) batch.callbacks = { ...record.callbacks, ...batch.callbacks };
    } else {
      if (job.reports.some((seen) => seen.id === record.id)) return {};
      job.reports.push(record);
      if (record.retracts !== undefined) job.retracted.add(record.retracts);
      for (const child of record.emitted ?? []) {
        // Another tenant's job of that id stays out of this batch: its own tenant's child is not tracked.
        if (this.foreign(child, record.tenant)) continue;
        job.children.add(child);
        const known = this.jobOf(child, batch);
        known.parent ??= job.id;
        known.tenant ??= record.tenant;
        if (job.lineage !== undefined && known.lineage === undefined) this.attribute(known, job.lineage, batch);
      }
      for (const child of record.unsent ?? []) {
        if (this.foreign(child, record.tenant)) continue;
        const known = this.jobOf(child, batch);
        known.unsent = true;
        this.reclassify(known, batch);
      }
      for (const child of record.emitted ?? []) if (job.children.has(child)) this.reclassify(this.jobs.get(child) as TrackedJob, batch);
    }
    this.reclassify(job, batch);
    return !wasComplete && isComplete(batch) ? { completed: batch, batch } : { batch };
  }

  /** The job's state, or undefined when no record named it. */
  job(id: string): TrackedJob | undefined {
    return this.jobs.get(id);
  }

  private batchOf(id: string, tenant: string | undefined, at: string): TrackedBatch {
    const key = batchKey(tenant, id);
    let batch = this.batches.get(key);
    if (batch === undefined) {
      batch = {
        id,
        ...(tenant === undefined ? {} : { tenant }),
        key,
        counts: emptyCounts(),
        announced: false,
        cancelled: false,
        paused: false,
        refused: 0,
        conflicts: 0,
        first_seen: at,
        last_seen: at,
      };
      this.batches.set(key, batch);
      const named = this.named.get(id);
      if (named === undefined) this.named.set(id, [batch]);
      else named.push(batch);
    }
    return batch;
  }

  /** The job, created as `withdrawn` (counted nowhere) until {@link reclassify} places it. */
  private jobOf(id: string, batch: TrackedBatch): TrackedJob {
    let job = this.jobs.get(id);
    if (job === undefined) {
      job = {
        id,
        batch: batch.id,
        batchKey: batch.key,
        created: false,
        children: new Set(),
        unsent: false,
        reports: [],
        retracted: new Set(),
        cls: 'withdrawn',
        conflict: false,
      };
      this.jobs.set(id, job);
    }
    return job;
  }

  /** Derives the job's class again and moves it between the batch's counts (and its lineage's). */
  private reclassify(job: TrackedJob, batch: TrackedBatch): void {
    const before = job.cls;
    const hadConflict = job.conflict;
    classify(job);
    if (job.conflict !== hadConflict) batch.conflicts += job.conflict ? 1 : -1;
    if (before === job.cls) return;
    count(batch.counts, before, -1);
    count(batch.counts, job.cls, +1);
    const lineage = job.lineage === undefined ? undefined : batch.lineages?.get(job.lineage);
    if (lineage !== undefined) {
      count(lineage, before, -1);
      count(lineage, job.cls, +1);
    }
  }

  /**
   * Counts the job, and every job below it that no lineage counts yet (reported before their
   * parent named them), in the lineage of step job `lineage`.
   */
  private attribute(first: TrackedJob, lineage: string, batch: TrackedBatch): void {
    const lineages = batch.lineages;
    if (lineages === undefined) return;
    let counts = lineages.get(lineage);
    if (counts === undefined) lineages.set(lineage, (counts = emptyCounts()));
    const stack = [first];
    for (let job = stack.pop(); job !== undefined; job = stack.pop()) {
      job.lineage = lineage;
      count(counts, job.cls, +1);
      for (const child of job.children) {
        const below = this.jobs.get(child);
        if (below !== undefined && below.lineage === undefined) stack.push(below);
      }
    }
  }
}

/** Sets `cls`, `final` and `conflict` from the job's reports (see BatchFold). */
export function classify(job: TrackedJob): void {
  const standing = job.reports.filter((report) => !job.retracted.has(report.id));
  let final: SettledReport | undefined;
  let conflict = false;
  let settledAttempt = 0;
  let promised = 0;
  for (const report of standing) {
    if (FINAL_OUTCOMES.has(report.outcome)) {
      if (final === undefined) final = report;
      else if (report.outcome !== final.outcome) conflict = true;
      settledAttempt = Math.max(settledAttempt, report.attempt);
    } else {
      promised = Math.max(promised, report.next_attempt ?? report.attempt + 1);
    }
  }
  job.final = final;
  job.conflict = conflict;
  // Never reported by itself nor created, and its parent's emit of it failed: it never existed.
  const exists = job.created || job.reports.length > 0 || !job.unsent;
  if (!exists) job.cls = 'withdrawn';
  else if (final === undefined || promised > settledAttempt) job.cls = 'in_flight';
  else job.cls = final.outcome as 'completed' | 'dead' | 'discarded' | 'cancelled';
}

function emptyCounts(): BatchCounts {
  return { known: 0, completed: 0, failed: 0, dead: 0, discarded: 0, cancelled: 0, in_flight: 0 };
}

function count(counts: BatchCounts, cls: JobClass, delta: number): void {
  if (cls === 'withdrawn') return;
  counts.known += delta;
  counts[cls] += delta;
  if (cls === 'dead' || cls === 'discarded') counts.failed += delta;
}

/**
 * The state word of a batch (docs/batches.md "Status"): `running` while a job of it is in flight,
 * then `completed`, or `cancelled` when `batch cancel` was recorded. A cancelled batch whose every
 * job had settled before the cancel reached a stage is still `cancelled`: that is what was asked.
 */
export function batchState(batch: TrackedBatch): 'running' | 'completed' | 'cancelled' {
  if (!isComplete(batch)) return 'running';
  return batch.cancelled ? 'cancelled' : 'completed';
}

/** The state of one job for `job status`: its class, or `retrying` / `suspect` when a further attempt is promised. */
export function jobState(
  job: TrackedJob,
): JobClass | 'pending' | Exclude<SettlementOutcome, 'completed' | 'dead' | 'discarded' | 'cancelled'> {
  if (job.cls !== 'in_flight') return job.cls;
  const last = job.reports.filter((report) => !job.retracted.has(report.id)).at(-1);
  if (last === undefined) return 'pending';
  return last.outcome === 'retrying' || last.outcome === 'suspect' || last.outcome === 'parked' ? last.outcome : 'pending';
}
