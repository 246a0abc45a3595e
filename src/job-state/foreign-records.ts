import type { JobRecord, JobRow } from './job-lifecycle.js';

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
