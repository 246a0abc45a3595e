import type { ReportDetails } from '../../tracking-stream/tracking-stream.js';
import type { SettledReport } from '../../tracking-stream/tracking-report.js';
import { recordableResult, UNRECORDABLE_RESULT } from '../../job/job-result.js';
import type { Logger } from '../../logging/logger.js';
import type { BatchReports } from './batch-reports.js';
import type { Delivery, SettlementInput } from '../channels/delivery.js';

/** How a tracked completion went: everything confirmed, or what failed and what the next report must say. */
export interface TrackedCompletion {
  emitted: number;
  /** The `completed` report, confirmed when there is no failure. */
  report?: SettledReport;
  failure?: { err: unknown; emitted: boolean; details: ReportDetails };
}

/**
 * A tracked job's return: its `completed` report (naming every job it emitted) is published
 * beside the emits and awaited with them. When an emit or the report fails, the job is not
 * complete: the failure says whether its emits were confirmed, and the details of the report
 * that settles it instead (retracting the `completed` one if it reached the stream).
 */
export async function trackedCompletion(
  reports: BatchReports,
  log: Logger,
  delivery: Delivery,
  outcome: Extract<SettlementInput, { kind: 'completed' }>,
  batch: string | undefined,
): Promise<TrackedCompletion> {
  const { job, ctx } = outcome;
  // settle() closes the context at once: the children listed below are all there will be
  // (a closed context adds none), so the report can name the context's own list.
  const emits = ctx.settle();
  const { result, problem } = recordableResult(ctx.result);
  if (problem !== undefined)
    log.warn(UNRECORDABLE_RESULT, {
      job_id: job.id,
      err: problem,
    });
  const { report, sent } = reports.completed(delivery, job, batch, {
    emitted: ctx.children ?? [],
    ...(batch === undefined && ctx.childQueues !== undefined && ctx.childQueues.length > 0 ? { emitted_to: ctx.childQueues } : {}),
    ...(result === undefined ? {} : { result }),
  });
  // Both awaited, neither left unobserved: the report's confirm usually comes after the emits'.
  let failure: { err: unknown; emitted: boolean } | undefined;
  let emitted = 0;
  try {
    emitted = await emits;
  } catch (err) {
    failure = { err, emitted: false };
  }
  let reported = report !== undefined;
  try {
    await sent;
  } catch (err) {
    reported = false;
    failure ??= { err, emitted: true };
  }
  if (failure === undefined) return { emitted, report };
  const details: ReportDetails = {
    ...(reported ? { retracts: (report as SettledReport).id } : {}),
    ...(ctx.unsent !== undefined && ctx.unsent.length > 0 ? { unsent: [...ctx.unsent] } : {}),
  };
  return { emitted, failure: { ...failure, details } };
}
