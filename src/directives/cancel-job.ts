import { openConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { ENDED_STATES, shownState, type JobRow } from '../job-state/job-lifecycle.js';
import { uuidv7Time } from '../job/uuid-v7.js';
import type { JobStore } from '../job-state/job-store.js';
import { jobStateView, type JobStateView } from '../job-state/job-views.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';
import { ensureTrackingStream } from '../tracking-stream/tracking-reader.js';
import { stamp, type DirectiveRecord } from '../tracking-stream/tracking-report.js';
import { publishRecord } from '../tracking-stream/tracking-stream.js';
import { readJobStore } from '../tracker/tracker.js';

/** How long a cancel waits for the job store to see a job created moments ago, and how often it looks. */
export const STORE_CATCH_UP_MS = 5000;
const STORE_LOOK_MS = 100;

/**
 * A job the store does not know yet although its id was made less than STORE_CATCH_UP_MS ago:
 * its `created` report is on its way (the tracker writes the PostgreSQL store a moment after the
 * publish). Looked for again until then; any other id is unknown at once.
 */
async function seenSoon(jobs: JobStore, id: string): Promise<JobRow | undefined> {
  const made = uuidv7Time(id);
  if (made === undefined) return undefined;
  while (Date.now() < made + STORE_CATCH_UP_MS) {
    await new Promise((resolve) => setTimeout(resolve, STORE_LOOK_MS));
    const row = await jobs.get(id);
    if (row !== undefined) return row;
  }
  return undefined;
}

/**
 * `job cancel <id>` / `DELETE /ojs/v1/jobs/{id}` (docs/job-state.md): a tracked job that has not
 * started is discarded unrun by the stage that meets it, and reported `cancelled`. The cancel is
 * appended to the `job-cancels` stream, which every stage reads into a set of ids (JobCancels),
 * then to the tracking stream, where the job store shows it `cancelled` at once.
 *
 * A job that started in between runs to its end (a running handler is not interrupted). A cancel
 * sent right after the publish, before the store has seen the job, waits for it (seenSoon).
 * @param store the store to read (the admin API's); by default read as `job status` reads it.
 * @throws StagecoachError NOT_FOUND when no record names the job; CONFLICT when it is active,
 * ended or already cancelled.
 */
export async function cancelJob(config: CompiledConfig, id: string, log: Logger, store?: JobStore): Promise<JobStateView> {
  const jobs = store ?? (await readJobStore(config, log));
  let row;
  try {
    row = (await jobs.get(id)) ?? (await seenSoon(jobs, id));
  } finally {
    if (store === undefined) await jobs.close();
  }
  if (row === undefined) throw new StagecoachError('NOT_FOUND', `no tracking report names job "${id}" (is its queue's tracking on?)`);
  const state = shownState(row);
  if (ENDED_STATES.has(state) || state === 'active') {
    throw new StagecoachError(
      'CONFLICT',
      `job "${id}" is ${state === 'cancelled' ? 'already cancelled' : state}: only a job that has not started can be cancelled`,
    );
  }
  const record = stamp<DirectiveRecord>({
    kind: 'directive',
    action: 'cancel',
    job: id,
    ...(row.tenant === undefined ? {} : { tenant: row.tenant }),
  });
  const connection = await openConnection(config, log, 'stagecoach-job-cancel');
  try {
    await ensureTrackingStream(connection, config, 'job-cancels');
    const publisher = await ConfirmPublisher.open(connection);
    try {
      const names = new BrokerNames(config.prefix);
      await publishRecord(publisher, names.jobCancels, record);
      await publishRecord(publisher, names.tracking, record);
    } finally {
      await publisher.close();
    }
  } finally {
    await connection.close().catch(() => undefined);
  }
  return jobStateView({ ...row, cancel_requested: record.at });
}
