import type { JobRecord, JobRow } from './job-lifecycle.js';

/** A refused record: its job, the tenant the job belongs to and the tenant the record named. */
export interface ForeignRecord {
  job: string;
  tenant: string;
  claimed: string;
  kind: JobRecord['kind'];
}

/**
 * The records a job store refused as another tenant's (isForeignRecord): counted, and told to
 * whoever listens (the tracker's StoreWriter logs each).
 */
export class ForeignRecords {
  count = 0;
  private listener: ((refused: ForeignRecord) => void) | undefined;

  /** Who is told of each refusal from now on (one listener: the store's writer). */
  onRefused(listener: (refused: ForeignRecord) => void): void {
    this.listener = listener;
  }

  refuse(row: JobRow, record: JobRecord): void {
    this.count++;
    this.listener?.({ job: record.job, tenant: row.tenant ?? '', claimed: record.tenant ?? '', kind: record.kind });
  }
}
