import type { Job } from '../../job/job.types.js';

/** Most envelopes kept: about 2 KB each, so a few tens of MB at most. */
export const ENVELOPE_CACHE_SIZE = 20_000;

/** A job as pushed through this server: the envelope sent, and what the binding shows beside it. */
export interface PushedJob {
  job: Job;
  /** The id its tenant's client gave it, when the job is kept under another (tenant-job-ids.ts): shown to that tenant. */
  clientId?: string;
  /** The OJS priority as given (-100..100); the envelope's is the same number, mapped onto the broker's levels on the wire only. */
  priority?: number;
  /** Top-level fields the binding does not know, shown back as given. */
  extensions: Record<string, unknown>;
  /** `options.visibility_timeout_ms` of its push: its claims' visibility timeout unless a fetch names one. */
  visibilityMs?: number;
  /** Its retry policy's `max_attempts`: its own, else its queue's `default_retry`. */
  maxAttempts?: number;
  /** Pushed `pending` and not activated by this server since (the store says more once it knows the job). */
  pending?: boolean;
}

/**
 * The envelopes of the jobs pushed through this server, newest ENVELOPE_CACHE_SIZE kept: the job
 * store (docs/job-state.md) keeps a job's state and history, not its arguments, so INFO shows
 * `args`, `meta` and the extensions of a job pushed here since the server started, and the store's
 * fields alone for any other (docs/http-binding.md, "What INFO shows").
 */
export class EnvelopeCache {
  private readonly jobs = new Map<string, PushedJob>();

  constructor(private readonly size = ENVELOPE_CACHE_SIZE) {}

  add(pushed: PushedJob): void {
    this.jobs.set(pushed.job.id, pushed);
    if (this.jobs.size > this.size) {
      const oldest = this.jobs.keys().next();
      if (oldest.done !== true) this.jobs.delete(oldest.value);
    }
  }

  get(id: string): PushedJob | undefined {
    return this.jobs.get(id);
  }

  has(id: string): boolean {
    return this.jobs.has(id);
  }

  /** Every envelope kept, oldest first. */
  values(): IterableIterator<PushedJob> {
    return this.jobs.values();
  }

  clear(): void {
    this.jobs.clear();
  }
}
