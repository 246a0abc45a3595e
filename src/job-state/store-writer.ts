import type { TrackingRecord } from '../tracking-stream/tracking-report.js';
import type { Logger } from '../logging/logger.js';
import type { JobRecord } from './job-lifecycle.js';
import type { JobStore } from './job-store.js';

/** Most records in one write (one transaction in PostgreSQL). */
export const STORE_BATCH = 5000;
/**
 * How long the first record of a write waits for others. A job's records (created, started,
 * settled, its children's created) mostly come within this of each other, and folded together
 * they are one row written once, not three times: most of what the store costs PostgreSQL
 * (bench `--only jobstate`). Well within the store's promise of states current within 2 s.
 */
export const STORE_LINGER_MS = 250;
/** The wait before a failed write is tried again (the database away): its records are kept. */
export const STORE_RETRY_MS = 1000;

/** The records the job store folds: created, settled, progress, and a `job cancel` directive. */
export function jobRecordOf(record: TrackingRecord): JobRecord | undefined {
  if (record.kind === 'created' || record.kind === 'settled' || record.kind === 'progress') return record;
  if (record.kind === 'directive' && record.action === 'cancel' && typeof record.job === 'string') return record as JobRecord;
  return undefined;
}

/**
 * Writes the records a tracker reads into its job store in batches: everything read within
 * STORE_LINGER_MS of the first record (or while the write before is running) goes in one write,
 * at most STORE_BATCH at a time, one write at a time, in stream order; written() flushes at
 * once. A failed write is tried again with the same records after STORE_RETRY_MS (logged) until
 * it succeeds or the writer closes: the store only lags.
 */
export class StoreWriter {
  private buffer: JobRecord[] = [];
  private writing: Promise<void> | undefined;
  /** Ends the linger of the write being gathered (see written()). */
  private flushNow: (() => void) | undefined;
  private closed = false;

  constructor(
    readonly store: JobStore,
    private readonly log: Logger,
  ) {
    store.foreign.onRefused((refused) =>
      log.warn("job record refused: it names another tenant than the job's", {
        job_id: refused.job,
        tenant: refused.tenant,
        record_tenant: refused.claimed,
        kind: refused.kind,
      }),
    );
  }

  add(record: TrackingRecord): void {
    const job = jobRecordOf(record);
    if (job === undefined) return;
    this.buffer.push(job);
    this.writing ??= this.linger().then(() => this.drain());
  }

  /** Resolves once every record added before the call is written (or the writer closed), without the linger. */
  async written(): Promise<void> {
    while (this.writing !== undefined) {
      this.flushNow?.();
      await this.writing;
    }
  }

  private linger(): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.flushNow?.(), STORE_LINGER_MS);
      this.flushNow = () => {
        clearTimeout(timer);
        this.flushNow = undefined;
        resolve();
      };
    });
  }

  /** Writes what is buffered; a write failing now is not tried again (the next tracker's replay writes it). */
  async close(): Promise<void> {
    this.closed = true;
    await this.written();
  }

  private async drain(): Promise<void> {
    try {
      while (this.buffer.length > 0) {
        const batch = this.buffer.slice(0, STORE_BATCH);
        try {
          await this.store.apply(batch);
          this.buffer = this.buffer.slice(batch.length);
        } catch (err) {
          this.log.warn('job store write failed; trying again', { records: batch.length, err: (err as Error).message });
          if (this.closed) return;
          await new Promise((resolve) => setTimeout(resolve, STORE_RETRY_MS));
        }
      }
    } finally {
      this.writing = undefined;
    }
  }
}
