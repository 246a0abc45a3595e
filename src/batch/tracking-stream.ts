import type { PublishChannel } from '../broker/confirm-publisher.js';
import type { Job } from '../job/job.types.js';
import { uuidv7 } from '../job/uuid-v7.js';
import { TRACKING_CONTENT_TYPE, type SettledReport, type SettlementOutcome, type TrackingRecord } from './tracking-report.js';

/**
 * Appends one record to the tracking stream (`<prefix>.tracking`) through the fanout exchange of
 * the same name, with the publisher's confirm: resolves once the broker has it. Both are part of
 * the core topology every stage, `provision` and `Publisher` declare (topology/build-topology.ts);
 * not the default exchange, which tenant users may not write (see trackingExchange).
 */
export function publishRecord(publisher: PublishChannel, stream: string, record: TrackingRecord): Promise<void> {
  return publisher.publish(stream, '', Buffer.from(JSON.stringify(record)), {
    contentType: TRACKING_CONTENT_TYPE,
    messageId: record.id,
    type: `tracking.${record.kind}`,
    persistent: true,
  });
}

/**
 * Appends several records in one stream message (a JSON array; one record alone is published as
 * itself): one publish and one confirm for the settlement reports of a stage's event-loop turn.
 * Readers take them in array order (parseRecords).
 */
export function publishRecords(publisher: PublishChannel, stream: string, records: TrackingRecord[]): Promise<void> {
  if (records.length === 1) return publishRecord(publisher, stream, records[0] as TrackingRecord);
  return publisher.publish(stream, '', Buffer.from(JSON.stringify(records)), {
    contentType: TRACKING_CONTENT_TYPE,
    messageId: (records[0] as TrackingRecord).id,
    type: 'tracking.records',
    persistent: true,
  });
}

/** Where a settlement happened: the stage, the logical queue, the tenant of the physical queue. */
export interface SettlementPlace {
  stage: string;
  queue: string;
  /** The queue's tenant (trusted: the broker routed by it), else the job's for a shared queue. */
  tenant: string | undefined;
}

/** What a settlement adds to its report besides the outcome. */
export type ReportDetails = Pick<SettledReport, 'next_attempt' | 'error' | 'emitted' | 'retracts' | 'unsent'>;

/** The job's batch, when it has one: the one test the hot path pays for unbatched jobs. */
export function batchOf(job: Job | undefined): string | undefined {
  const batch = job?.meta.batch;
  return typeof batch === 'string' ? batch : undefined;
}

/**
 * The settlement report of a batched job (see SettledReport). Built in one object literal, not
 * through `stamp` (whose spreads copy it twice): it is made for every settlement of a batched
 * job, on the hot path of a batch (bench `--only tracking`).
 */
export function settledReport(
  job: Job,
  batch: string,
  place: SettlementPlace,
  outcome: SettlementOutcome,
  details?: ReportDetails,
): SettledReport {
  const tenant = place.tenant ?? job.tenant;
  const report: SettledReport = {
    kind: 'settled',
    id: uuidv7(),
    job: job.id,
    batch,
    stage: place.stage,
    queue: place.queue,
    type: job.type,
    outcome,
    attempt: job.attempt,
    at: new Date().toISOString(),
  };
  if (tenant !== undefined) report.tenant = tenant;
  return details === undefined ? report : Object.assign(report, details);
}
