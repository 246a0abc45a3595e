import { foldJob, type JobRow } from '../../job-state/job-lifecycle.js';
import { recordableResult } from '../../job/job-result.js';
import type { Job } from '../../job/job.types.js';
import type { SettledResult } from '../../runner/settle/settlement-result.js';
import type { SettleNext, SettlementCall, SettlementInterceptor } from '../../runner/settle/settlement-interceptor.js';
import type { SettledReport } from '../../tracking-stream/tracking-report.js';
import { batchOf, settledReport } from '../../tracking-stream/tracking-stream.js';
import { uuidv7 } from '../../job/uuid-v7.js';
import type { RetryTimes } from './retry-times.js';

/** The longest an ack, nack or cancel waits for its runner's settlement before asking the job store. */
export const LOCAL_SETTLEMENT_WAIT_MS = 10_000;
/** Most jobs whose row is kept here: a few hundred bytes each. */
export const SETTLED_ROWS_SIZE = 20_000;

/**
 * A settlement of this process, as an ack answers it: the result, and the job's row with its
 * report folded in; no row when the settlement made no report (its delivery lost with its
 * channel, or handed back unreported: the broker holds the job again).
 */
export interface LocalSettlement {
  result: SettledResult;
  row?: JobRow;
}

/**
 * The remote stages' settlements, told to the binding's answers as they happen: registered as a
 * settlement interceptor on each remote runner (this process holds the delivery an HTTP worker
 * acks, so its runner settles it here). An ack, nack or cancel waits for its job's settlement
 * (wait()) instead of polling the job store; its answer is the job's row folded here from the same
 * settlement (the report the store folds later), over what earlier settlements here left. The
 * retries' times (RetryTimes) are kept from the same results.
 */
export class SettlementWaits implements SettlementInterceptor {
  private readonly waiters = new Map<
    string,
    { attempt: number; claim: object | undefined; resolve: (settled: LocalSettlement | undefined) => void }
  >();
  private readonly rows = new Map<string, JobRow>();

  constructor(
    private readonly retries: RetryTimes,
    private readonly size = SETTLED_ROWS_SIZE,
  ) {}

  async settle(call: SettlementCall, next: SettleNext): Promise<SettledResult> {
    const result = await next(call);
    const job = 'job' in result && result.job !== undefined ? result.job : call.input.job;
    if (job === undefined) return result;
    if (result.kind === 'retried' && result.settled === 'acked') {
      this.retries.add(job.id, { nextAttempt: result.nextAttempt, delayMs: result.delayMs, at: Date.now() });
    }
    const row = this.fold(job, result, call);
    const waiter = this.waiters.get(job.id);
    // Only the settlement of the claim waited on answers it: an earlier claim of the same job and
    // attempt (its visibility ran out) may be handed back after the job was claimed again.
    const claim = 'ctx' in call.input ? call.input.ctx : undefined;
    if (
      waiter !== undefined &&
      waiter.attempt === job.attempt &&
      (waiter.claim === undefined || claim === undefined || waiter.claim === claim)
    ) {
      this.waiters.delete(job.id);
      waiter.resolve(row === undefined ? { result } : { result, row });
    }
    return result;
  }

  /**
   * The settlement of attempt `attempt` of job `id` by a runner of this process, once done;
   * undefined when it did not come within `timeoutMs`. Call it before the ack that leads to the
   * settlement.
   * `startedAt`: when it was claimed (its `started`, which the row shows). `claim`: the context its
   * handler was given, so that only that claim's settlement answers.
   */
  wait(
    id: string,
    attempt: number,
    startedAt: string | undefined,
    timeoutMs = LOCAL_SETTLEMENT_WAIT_MS,
    claim?: object,
  ): Promise<LocalSettlement | undefined> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(undefined), timeoutMs);
      const done = (settled: LocalSettlement | undefined): void => {
        clearTimeout(timer);
        if (this.waiters.get(id)?.resolve === done) this.waiters.delete(id);
        if (settled?.row !== undefined && startedAt !== undefined) {
          const started = {
            kind: 'settled',
            id: uuidv7(),
            job: id,
            stage: '',
            queue: '',
            outcome: 'started',
            attempt,
            at: startedAt,
          } as const;
          settled.row = foldJob(settled.row, started, noRetention);
        }
        resolve(settled);
      };
      this.waiters.set(id, { attempt, claim, resolve: done });
    });
  }

  /** Forgets the rows (a test reset emptied the job store); the waits go on. */
  clear(): void {
    this.rows.clear();
  }

  /** The job's row with this settlement's report folded in (as the job store folds it), or undefined when it makes none. */
  private fold(job: Job, result: SettledResult, call: SettlementCall): JobRow | undefined {
    if (result.settled === 'abandoned') return undefined;
    const report = result.report ?? untrackedCompletion(job, result, call);
    if (report === undefined) return undefined;
    let row = this.rows.get(job.id);
    if (row === undefined) {
      const at = job.created_at ?? new Date().toISOString();
      row = foldJob(
        undefined,
        {
          kind: 'created',
          id: uuidv7(),
          job: job.id,
          queue: job.queue,
          at,
          ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
          ...(job.scheduled_at === undefined ? {} : { scheduled_at: job.scheduled_at }),
          ...(job.tags === undefined ? {} : { tags: job.tags }),
        },
        noRetention,
      );
    }
    row = foldJob(row, report, noRetention);
    this.rows.delete(job.id);
    this.rows.set(job.id, row);
    if (this.rows.size > this.size) {
      const oldest = this.rows.keys().next();
      if (oldest.done !== true) this.rows.delete(oldest.value);
    }
    return row;
  }
}

/**
 * The one settlement that carries no report: a completion of a job its queue does not track (the
 * runner's hot path makes none). The binding still answers its ack with the job completed.
 */
function untrackedCompletion(job: Job, result: SettledResult, call: SettlementCall): SettledReport | undefined {
  if (result.kind !== 'completed' || call.input.kind !== 'completed') return undefined;
  const { result: value } = recordableResult(call.input.ctx.result);
  return settledReport(
    job,
    batchOf(job),
    { stage: '', queue: job.queue, tenant: job.tenant },
    'completed',
    value === undefined ? {} : { result: value },
  );
}

function noRetention(): undefined {
  return undefined;
}
