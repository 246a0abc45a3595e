import type { PublishChannel } from '../broker/confirm-publisher.js';
import type { Job } from '../job/job.types.js';
import { uuidv7 } from '../job/uuid-v7.js';
import { isoNow } from '../util/timestamp.js';
import {
  groupReportId,
  TRACKING_CONTENT_TYPE,
  type SettledGroup,
  type SettledReport,
  type SettlementOutcome,
  type TrackingRecord,
} from './tracking-report.js';

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
 * Settlement reports made together (a stage's event-loop turn), to be published in one stream
 * message: `id` is the group's, and each report's own is derived from it as it joins
 * (`groupReportId(id, index)`), so that it is known before the publish.
 *
 * Each report keeps its own time, taken as it joins: a turn can last milliseconds on a busy
 * process, and the job store orders a job's records by their times (a hand-back, then the next
 * start) and answers an HTTP worker's ack only with a settlement made after the ack arrived
 * (settlement-wait.ts). The group's `at` (its first report's) is what a compact message leaves
 * out of each report that has the same.
 */
export class ReportGroup {
  readonly id = uuidv7();
  readonly at = isoNow();
  readonly reports: SettledReport[] = [];

  /** The settlement report of a tracked job (see settledReport), added to the group. */
  add(job: Job, batch: string | undefined, place: SettlementPlace, outcome: SettlementOutcome, details?: ReportDetails): SettledReport {
    const report = settledReport(job, batch, place, outcome, details, groupReportId(this.id, this.reports.length), isoNow());
    this.reports.push(report);
    return report;
  }
}

/** Fields a group writes once when every report shares them (see SettledGroup). */
const SHARED_FIELDS = ['batch', 'tenant', 'stage', 'queue', 'type', 'outcome', 'attempt'] as const;

/**
 * Appends the reports of a group in one stream message, a SettledGroup (one report alone is
 * published as itself): one publish, one confirm and one stream entry for all of them, and the
 * fields they share written once (about a third of the bytes of the reports one by one).
 * Readers expand it in order (parseRecords).
 */
export function publishGroup(publisher: PublishChannel, stream: string, group: ReportGroup): Promise<void> {
  const { reports } = group;
  if (reports.length === 1) return publishRecord(publisher, stream, reports[0] as SettledReport);
  return publisher.publish(stream, '', Buffer.from(JSON.stringify(compact(group))), {
    contentType: TRACKING_CONTENT_TYPE,
    messageId: group.id,
    type: 'tracking.settled-group',
    persistent: true,
  });
}

/** The group as written to the stream (see SettledGroup). */
export function compact(group: ReportGroup): SettledGroup {
  const { reports } = group;
  const first = reports[0] as SettledReport;
  const common: Record<string, unknown> = {};
  for (const field of SHARED_FIELDS) {
    const value = first[field];
    if (value === undefined) continue;
    let shared = true;
    for (const report of reports) {
      if (report[field] !== value) {
        shared = false;
        break;
      }
    }
    if (shared) common[field] = value;
  }
  const own: Array<Partial<SettledReport>> = new Array<Partial<SettledReport>>(reports.length);
  for (let index = 0; index < reports.length; index++) {
    const report = reports[index] as SettledReport;
    const entry: Record<string, unknown> = {};
    for (const field in report) {
      if (field === 'kind' || field in common) continue;
      const value = report[field as keyof SettledReport];
      if (value === undefined) continue;
      if (field === 'id' && value === groupReportId(group.id, index)) continue;
      if (field === 'at' && value === group.at) continue;
      entry[field] = value;
    }
    own[index] = entry;
  }
  return { kind: 'settled-group', id: group.id, at: group.at, common: common as Partial<SettledReport>, reports: own };
}

/** Where a settlement happened: the stage, the logical queue, the tenant of the physical queue. */
export interface SettlementPlace {
  stage: string;
  queue: string;
  /** The queue's tenant (trusted: the broker routed by it), else the job's for a shared queue. */
  tenant: string | undefined;
}

/** What a settlement adds to its report besides the outcome. */
export type ReportDetails = Pick<SettledReport, 'next_attempt' | 'error' | 'emitted' | 'emitted_to' | 'result' | 'retracts' | 'unsent'>;

/** The job's batch, when it has one: the one test the hot path pays for unbatched jobs. */
export function batchOf(job: Job | undefined): string | undefined {
  const batch = job?.meta.batch;
  return typeof batch === 'string' ? batch : undefined;
}

/**
 * The settlement report of a tracked job (see SettledReport). Built in one object literal, not
 * through `stamp` (whose spreads copy it twice): it is made for every settlement of a tracked
 * job, on the hot path (bench `--only tracking`).
 */
export function settledReport(
  job: Job,
  batch: string | undefined,
  place: SettlementPlace,
  outcome: SettlementOutcome,
  details?: ReportDetails,
  id: string = uuidv7(),
  at: string = new Date().toISOString(),
): SettledReport {
  const tenant = place.tenant ?? job.tenant;
  const report: SettledReport = {
    kind: 'settled',
    id,
    job: job.id,
    stage: place.stage,
    queue: place.queue,
    type: job.type,
    outcome,
    attempt: job.attempt,
    at,
  };
  if (batch !== undefined) report.batch = batch;
  if (tenant !== undefined) report.tenant = tenant;
  return details === undefined ? report : Object.assign(report, details);
}
