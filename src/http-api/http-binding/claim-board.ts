import { JobCancelledError, JobRequeuedError, NonRetryableError, StagecoachError, VisibilityExpiredError } from '../../errors/errors.js';
import { comparePriority } from '../../job/amqp-priority.js';
import type { Job } from '../../job/job.types.js';
import type { EmitSpec } from '../../job/job.types.js';
import { hasExpired, JobExpiredError } from '../../retry/handler-outcomes.js';
import type { StageContext } from '../../stage/stage.types.js';

/** How long a claimed job stays with its worker without an ack, nack or heartbeat (docs/http-binding.md; spec/ojs-worker-protocol.md 5.2: 1800 s). */
export const DEFAULT_VISIBILITY_MS = 1_800_000;
/** The shortest and longest visibility timeout a worker may ask for. */
export const VISIBILITY_RANGE_MS: readonly [number, number] = [1_000, 12 * 3600_000];

/** What a worker's ack carries: the result, and the jobs it emits (settled as `ctx.emit` is). */
export interface AckBody {
  result?: unknown;
  emit?: ReadonlyArray<{ queue: string } & EmitSpec>;
}

/** What a worker's nack carries (spec/ojs-worker-protocol.md): `retryable: false` dead-letters at once. */
export interface NackError {
  code?: string;
  type?: string;
  message?: string;
  retryable?: boolean;
}

/** One job in a remote stage's handler: waiting for a claim, or claimed by a worker. */
export interface Held {
  key: string;
  job: Job;
  ctx: StageContext;
  /** Called once the job is claimed: the runner's `started` report. */
  onClaim: (job: Job) => void;
  settle: { resolve: (result: unknown) => void; reject: (error: unknown) => void };
  claim?: { worker: string; visibilityMs: number; until: number; timer: NodeJS.Timeout; at: string; deadline?: NodeJS.Timeout };
}

/**
 * The jobs that remote stages' handlers hold for HTTP workers (src/http-api/http-binding/remote-stages.ts):
 * a line per queue key, by OJS priority (higher first), then in delivery order. A fetch claims from the lines asked for, in order,
 * each job exactly once; the claim ends with the worker's ack (the handler returns its result
 * after emitting what it sent), its nack (the handler throws: retried or dead-lettered by the
 * settlement) or the visibility timeout (VisibilityExpiredError: handed back, same attempt).
 * Every delivery stays unacknowledged on the broker meanwhile: a crash of the server loses none.
 */
export class ClaimBoard {
  private readonly waiting = new Map<string, Held[]>();
  private readonly claimed = new Map<string, Held>();
  private readonly arrivals = new Set<() => void>();
  /** Keys whose queue is paused: their jobs stay held, handed to no worker until it resumes. */
  private readonly paused = new Set<string>();

  /** A remote handler's body: resolves with the worker's result, rejects with its failure. */
  hold(key: string, job: Job, ctx: StageContext, onClaim: (job: Job) => void): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      const held: Held = { key, job, ctx, onClaim, settle: { resolve, reject } };
      let line = this.waiting.get(key);
      if (line === undefined) this.waiting.set(key, (line = []));
      insertByPriority(line, held);
      // A lost delivery (its channel died) will come again: it must not be handed out meanwhile.
      ctx.signal.addEventListener('abort', () => this.drop(held, ctx.signal.reason), { once: true });
      for (const wake of [...this.arrivals]) wake();
    });
  }

  /**
   * Claims up to `count` jobs from the lines of `keys`, taken in that order. A job with a `timeout`
   * fails with HANDLER_TIMEOUT when its worker has not settled it that long after the claim, as a
   * local handler's run would (retried by its policy); `visibilityOf` gives each job's visibility timeout.
   */
  claim(keys: readonly string[], count: number, worker: string, visibilityOf: (job: Job) => number): Held[] {
    const taken: Held[] = [];
    for (const key of keys) {
      if (this.paused.has(key)) continue;
      const line = this.waiting.get(key);
      while (line !== undefined && line.length > 0 && taken.length < count) {
        const held = line.shift() as Held;
        // Expired while it waited for a worker (OJS core `expires_at`): discarded, never handed out.
        if (held.job.expires_at !== undefined && hasExpired(held.job)) {
          held.settle.reject(new JobExpiredError(held.job.expires_at));
          continue;
        }
        const visibilityMs = visibilityOf(held.job);
        const timer = setTimeout(() => this.expire(held), visibilityMs);
        timer.unref();
        held.claim = { worker, visibilityMs, until: Date.now() + visibilityMs, timer, at: new Date().toISOString() };
        const seconds = held.job.timeout;
        if (seconds !== undefined) {
          held.claim.deadline = setTimeout(() => this.timedOut(held, seconds), seconds * 1000);
          held.claim.deadline.unref();
        }
        this.claimed.set(held.job.id, held);
        held.onClaim(held.job);
        taken.push(held);
      }
    }
    return taken;
  }

  /** How many jobs of a key wait for a claim (none while its queue is paused). */
  waitingOn(key: string): number {
    return this.paused.has(key) ? 0 : (this.waiting.get(key)?.length ?? 0);
  }

  /**
   * Follows the state of a key's queue (OJS queue configuration 5.1: workers do not fetch from a
   * paused queue): while paused, no fetch claims its jobs; on resume, waiting fetches look again.
   */
  setPaused(key: string, paused: boolean): void {
    if (paused) this.paused.add(key);
    else if (this.paused.delete(key)) for (const wake of [...this.arrivals]) wake();
  }

  /** How many jobs of a key the board holds, waiting or claimed. */
  heldOn(key: string): number {
    let held = this.waiting.get(key)?.length ?? 0;
    for (const claimed of this.claimed.values()) if (claimed.key === key) held++;
    return held;
  }

  /** Resolves when a job arrives on any line, or after `ms`. */
  async arrival(ms: number): Promise<void> {
    let wake: (() => void) | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve) => {
        wake = resolve;
        this.arrivals.add(resolve);
        timer = setTimeout(resolve, ms);
      });
    } finally {
      if (wake !== undefined) this.arrivals.delete(wake);
      clearTimeout(timer);
    }
  }

  /** The claim of a job, when this server holds one. */
  claimOf(id: string): Held | undefined {
    return this.claimed.get(id);
  }

  /** The worker's ack: its emits go out through the job's context, then the handler returns its result. */
  async ack(held: Held, body: AckBody): Promise<void> {
    this.release(held);
    try {
      for (const { queue, ...spec } of body.emit ?? []) await held.ctx.emit(queue, spec);
    } catch (err) {
      held.settle.reject(err);
      throw err;
    }
    held.settle.resolve(body.result);
  }

  nack(held: Held, error: NackError): void {
    this.release(held);
    const message = error.message ?? 'the worker reported a failure';
    const type = error.type ?? error.code;
    const failure = error.retryable === false ? new NonRetryableError(message, type) : new Error(message);
    if (type !== undefined && error.retryable !== false) failure.name = type;
    held.settle.reject(failure);
  }

  /** The worker hands the job back (a nack with `requeue`): available again at once, same attempt. */
  requeue(held: Held): void {
    this.release(held);
    held.settle.reject(new JobRequeuedError(held.job.id));
  }

  /** Extends the claims of `ids` held by `worker` (all of the worker's when `ids` is undefined); returns the ids extended. */
  heartbeat(worker: string, ids: readonly string[] | undefined, visibilityMs?: number, tenant?: string): string[] {
    const extended: string[] = [];
    for (const held of ids === undefined ? [...this.claimed.values()] : ids.map((id) => this.claimed.get(id))) {
      if (held?.claim === undefined || held.claim.worker !== worker) continue;
      if (tenant !== undefined && held.job.tenant !== tenant) continue;
      const ms = visibilityMs ?? held.claim.visibilityMs;
      clearTimeout(held.claim.timer);
      held.claim.timer = setTimeout(() => this.expire(held), ms);
      held.claim.timer.unref();
      held.claim.until = Date.now() + ms;
      extended.push(held.job.id);
    }
    return extended;
  }

  /** Cancels a job the board holds, claimed or waiting (the handler throws JobCancelledError); false when it holds none of that id. */
  cancel(id: string): Held | undefined {
    let held = this.claimed.get(id);
    if (held === undefined) {
      for (const line of this.waiting.values()) {
        const index = line.findIndex((waiting) => waiting.job.id === id);
        if (index >= 0) [held] = line.splice(index, 1);
      }
    }
    if (held === undefined) return undefined;
    this.release(held);
    held.settle.reject(new JobCancelledError(id));
    return held;
  }

  /** Hands every held job back (test reset, shutdown): each is settled by the runner as a visibility expiry. */
  releaseAll(): void {
    for (const held of [...this.claimed.values()]) this.expire(held);
    for (const line of this.waiting.values())
      for (const held of line.splice(0)) held.settle.reject(new VisibilityExpiredError(held.job.id, 0));
  }

  private expire(held: Held): void {
    if (held.claim === undefined || this.claimed.get(held.job.id) !== held) return;
    const ms = held.claim.visibilityMs;
    this.release(held);
    held.settle.reject(new VisibilityExpiredError(held.job.id, ms));
  }

  private timedOut(held: Held, seconds: number): void {
    if (this.claimed.get(held.job.id) !== held) return;
    this.release(held);
    held.settle.reject(new StagecoachError('HANDLER_TIMEOUT', `the worker did not settle the job within its timeout of ${seconds} s`));
  }

  private release(held: Held): void {
    if (held.claim !== undefined) {
      clearTimeout(held.claim.timer);
      clearTimeout(held.claim.deadline);
    }
    if (this.claimed.get(held.job.id) === held) this.claimed.delete(held.job.id);
  }

  private drop(held: Held, reason: unknown): void {
    const line = this.waiting.get(held.key);
    const index = line?.indexOf(held) ?? -1;
    if (index >= 0) line?.splice(index, 1);
    this.release(held);
    held.settle.reject(reason);
  }
}

/**
 * Puts a job in its line after every job of its priority or higher: a fetch hands out the highest
 * priority the server holds first, first come first served within a priority. Found from the
 * end, so that jobs of one priority (the common case) cost one comparison each.
 */
function insertByPriority(line: Held[], held: Held): void {
  let at = line.length;
  while (at > 0 && comparePriority((line[at - 1] as Held).job, held.job) > 0) at--;
  line.splice(at, 0, held);
}
