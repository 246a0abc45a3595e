import type { CompiledConfig, CompiledJobStoreConfig } from '../../config/config.types.js';
import { DuplicateJobError, StagecoachError } from '../../errors/errors.js';
import type { Job } from '../../job/job.types.js';
import { compileUnique } from '../../job/unique-policy.js';
import { stamp, type DirectiveRecord } from '../../tracking-stream/tracking-report.js';
import type { MemoryJobStore } from '../memory-job-store.js';
import { MemoryUniqueClaims } from './memory-unique-claims.js';
import { PostgresUniqueClaims } from './postgres-unique-claims.js';
import type { UniqueClaims } from './unique-claims.js';

/** What the producer publishing a unique job provides the gate (Publisher, a stage's ctx.emit). */
export interface UniqueHost {
  /** Whether the job's queue has `tracking` on for its tenant: a key is released by its holder's state. */
  tracked(job: Job): boolean;
  /** Publishes a `job cancel` directive (the job-cancels and tracking streams): a replaced holder is cancelled. */
  cancel(record: DirectiveRecord): Promise<void>;
}

/**
 * The unique-jobs step of enqueue (docs/unique-jobs.md; OJS unique jobs): at the end of the
 * enqueue chain, after the middleware, a job carrying `unique` claims its key before it is
 * published. A job without `unique` never reaches it (one property test in the chain's caller).
 *
 * On conflict: `reject` throws DuplicateJobError; `ignore` publishes nothing and answers the
 * holder's id; `replace` and `replace_except_schedule` take the key, cancel the holder (unless it
 * is active: refused as a duplicate) and publish, the latter keeping the holder's `scheduled_at`.
 * A publish that fails gives the key back.
 */
export class UniqueGate {
  private claims: UniqueClaims | undefined;
  /** With the memory store: the store this process folds job states into (see foldsHere). */
  private folded: (() => Promise<MemoryJobStore>) | undefined;

  constructor(private readonly store: CompiledJobStoreConfig) {}

  /**
   * With the memory store, says this process folds the job states into `store` (`stagecoach
   * admin`): its producers' keys are then claimed there. Without it, a unique job is refused,
   * for no store could tell when its key is released.
   * @returns the undo, for the process's end (the gate is the process's).
   */
  foldsHere(store: () => Promise<MemoryJobStore>): () => void {
    this.folded = store;
    this.claims = undefined;
    return () => {
      if (this.folded !== store) return;
      this.folded = undefined;
      this.claims = undefined;
    };
  }

  /**
   * Claims `job`'s key, then runs `publish`.
   * @returns undefined when `job` was published, else the id of the job that stands for it (`ignore`).
   * @throws StagecoachError INVALID_REQUEST for an invalid policy, without the PostgreSQL store, or
   *   for an untracked queue; DuplicateJobError for a refused duplicate; what `publish` throws.
   */
  async admit(job: Job, host: UniqueHost, publish: () => Promise<void>): Promise<string | undefined> {
    const policy = compileUnique(job);
    if (this.store.kind !== 'postgres' && this.folded === undefined) {
      throw new StagecoachError(
        'INVALID_REQUEST',
        `job "${job.type}" for queue "${job.queue}" carries "unique", which needs the PostgreSQL job store: set tracking.store to { "kind": "postgres", "url": "postgres://..." } (the memory store holds keys only for the pushes of \`stagecoach admin\`, which folds job states in its process; docs/unique-jobs.md)`,
      );
    }
    if (!host.tracked(job)) {
      throw new StagecoachError(
        'INVALID_REQUEST',
        `job "${job.type}" carries "unique", and queue "${job.queue}" has tracking off${job.tenant === undefined ? '' : ` for tenant "${job.tenant}"`}: a key is released by its job's state, which only a tracked job has (docs/unique-jobs.md)`,
      );
    }
    this.claims ??=
      this.store.kind === 'postgres'
        ? new PostgresUniqueClaims(this.store.url, this.store.table)
        : new MemoryUniqueClaims(this.folded as () => Promise<MemoryJobStore>);
    const outcome = await this.claims.claim({
      key: policy.key,
      job: job.id,
      tenant: job.tenant,
      periodMs: policy.periodMs,
      states: policy.states,
      replace: policy.onConflict === 'replace' || policy.onConflict === 'replace_except_schedule',
    });
    if (outcome.kind === 'held') {
      if (policy.onConflict === 'ignore') return outcome.holder.id;
      throw new DuplicateJobError(
        job.queue,
        job.type,
        outcome.holder,
        policy.key,
        policy.onConflict === 'reject' ? undefined : 'the job holding its uniqueness key is active and cannot be replaced',
      );
    }
    if (outcome.kind === 'replaced') {
      const { holder } = outcome;
      await host.cancel(
        stamp<DirectiveRecord>({
          kind: 'directive',
          action: 'cancel',
          job: holder.id,
          ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
        }),
      );
      if (policy.onConflict === 'replace_except_schedule' && holder.scheduled_at !== undefined) job.scheduled_at = holder.scheduled_at;
    }
    try {
      await publish();
    } catch (err) {
      await this.claims.release(policy.key, job.id).catch(() => undefined);
      throw err;
    }
    return undefined;
  }

  async close(): Promise<void> {
    await this.claims?.close();
    this.claims = undefined;
  }
}

/** One gate per job store and process: its pool opens at the first unique job, and never holds the process open. */
const gates = new Map<string, UniqueGate>();

/** The process's gate for `config`'s job store. */
export function uniqueGateFor(config: CompiledConfig): UniqueGate {
  const store = config.tracking.store;
  const id = store.kind === 'postgres' ? `${store.url}\u0000${store.table}` : 'memory';
  let gate = gates.get(id);
  if (gate === undefined) {
    gate = new UniqueGate(store);
    gates.set(id, gate);
  }
  return gate;
}
