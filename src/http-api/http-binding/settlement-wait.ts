import { ENDED_STATES, type JobRow } from '../../job-state/job-lifecycle.js';
import type { BindingContext } from './binding-context.js';

/** The longest an ack or nack waits for its settlement to reach the job store. */
export const SETTLEMENT_WAIT_MS = 10_000;
const POLL_MS = 20;

/**
 * The job's row once the settlement of `attempt` is in the store: ended, or waiting for a later
 * attempt (a retry), or back to `available` (handed back). The runner settles a delivery after
 * the handler returns, and reports it before the broker ack, so the store has it soon after;
 * bounded, for a queue whose `tracking` is off (the row then never moves).
 *
 * Only a state set at `since` or later counts (the request's arrival: the settlement's report is
 * made after it, on this process's clock). A store that has not yet folded this attempt's start
 * still shows the previous settlement, `retryable` at this very attempt, which the tests below
 * alone would take for this one: under load a second nack answered with the first's attempt.
 */
export async function waitForSettlement(ctx: BindingContext, id: string, attempt: number, since: string): Promise<JobRow | undefined> {
  const deadline = Date.now() + SETTLEMENT_WAIT_MS;
  let row: JobRow | undefined;
  for (;;) {
    row = await (await ctx.admin.jobs()).get(id);
    if (
      row !== undefined &&
      row.key[1] >= since &&
      (ENDED_STATES.has(row.state) || row.attempt > attempt || (row.state !== 'active' && row.outcome !== 'created'))
    )
      return row;
    if (Date.now() >= deadline) return row;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
