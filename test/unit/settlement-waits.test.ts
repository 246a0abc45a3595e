import { expect } from 'chai';
import { createJob } from '../../src/job/envelope.js';
import type { Job } from '../../src/job/job.types.js';
import type { JobContext } from '../../src/stage/job-context.js';
import type { Delivery } from '../../src/runner/channels/delivery.js';
import { intercepted, type SettlementCall } from '../../src/runner/settle/settlement-interceptor.js';
import type { SettledResult } from '../../src/runner/settle/settlement-result.js';
import { RetryTimes } from '../../src/http-api/http-binding/retry-times.js';
import { SettlementWaits } from '../../src/http-api/http-binding/settlement-waits.js';
import { settledReport } from '../../src/tracking-stream/tracking-stream.js';

const delivery = {} as Delivery;
const error = { type: 'Boom', message: 'boom' };

function jobAt(attempt: number): Job {
  return { ...createJob({ type: 'doc.convert', args: [1] }, { queue: 'remote' }), attempt };
}

describe('settlement waits (the HTTP binding awaits its runner)', () => {
  it("answers an ack with its runner's settlement as it happens, the job store never read (there is none)", async () => {
    const waits = new SettlementWaits(new RetryTimes());
    const job = jobAt(1);
    const ctx = { result: { pages: 3 } } as unknown as JobContext;
    const settle = intercepted([waits], () =>
      Promise.resolve<SettledResult>({ kind: 'completed', settled: 'acked', job, emitted: 0, seconds: 0.1 }),
    );
    const answer = waits.wait(job.id, 1, '2026-01-01T00:00:00.000Z');
    let told = false;
    void answer.then(() => (told = true));
    await settle({ delivery, input: { kind: 'completed', job, ctx, seconds: 0.1 } });
    // Told within the settlement's own turn: no poll in between.
    await Promise.resolve();
    await Promise.resolve();
    expect(told).to.equal(true);
    const local = await answer;
    expect(local?.result.kind).to.equal('completed');
    expect(local?.row).to.include({ state: 'completed', attempt: 1, started_at: '2026-01-01T00:00:00.000Z' });
    expect(local?.row?.result).to.deep.equal({ pages: 3 });
  });

  it("a nack's retry: the row waits for attempt 2 with the error, and its time is kept for the answer", async () => {
    const retries = new RetryTimes();
    const waits = new SettlementWaits(retries);
    const job = jobAt(1);
    const settle = intercepted([waits], () =>
      Promise.resolve<SettledResult>({
        kind: 'retried',
        settled: 'acked',
        job,
        nextAttempt: 2,
        delayMs: 1500,
        error,
        // The report the settlement made of it, which the row folds (as the job store will).
        report: settledReport(job, undefined, { stage: 'remote', queue: 'remote', tenant: undefined }, 'retrying', {
          next_attempt: 2,
          error,
        }),
      }),
    );
    const answer = waits.wait(job.id, 1, undefined);
    await settle({ delivery, input: { kind: 'failed', job, error: new Error('boom') } } as SettlementCall);
    const local = await answer;
    expect(local?.row).to.include({ state: 'retryable', attempt: 2 });
    expect(local?.row?.errors.map((e) => e.type)).to.deep.equal(['Boom']);
    expect(retries.fields(job.id, 2).retry_delay_ms).to.equal(1500);
  });

  it('a delivery lost with its channel is told at once, with no row (nothing was settled); no settlement within the bound answers undefined', async () => {
    const waits = new SettlementWaits(new RetryTimes());
    const job = jobAt(1);
    const lost = waits.wait(job.id, 1, undefined);
    await intercepted([waits], () => Promise.resolve<SettledResult>({ kind: 'lost', settled: 'abandoned' }))({
      delivery,
      input: { kind: 'suspect', job },
    });
    const told = await lost;
    expect(told?.result.kind).to.equal('lost');
    expect(told).not.to.have.property('row');
    expect(await waits.wait('elsewhere', 1, undefined, 5)).to.equal(undefined);
  });

  it("waits for its own claim's settlement: an earlier claim of the same job and attempt, handed back late, is not its answer", async () => {
    const waits = new SettlementWaits(new RetryTimes());
    const job = jobAt(1);
    const expired = { result: undefined } as unknown as JobContext;
    const claimed = { result: { pages: 1 } } as unknown as JobContext;
    // The second claim's ack waits; the first claim's hand-back (its visibility ran out) settles only now.
    const answer = waits.wait(job.id, 1, undefined, 1000, claimed);
    await intercepted([waits], () => Promise.resolve<SettledResult>({ kind: 'handed-back', settled: 'acked' }))({
      delivery,
      input: { kind: 'failed', job, error: new Error('visibility timeout'), ctx: expired },
    });
    await intercepted([waits], () =>
      Promise.resolve<SettledResult>({ kind: 'completed', settled: 'acked', job, emitted: 0, seconds: 0.1 }),
    )({ delivery, input: { kind: 'completed', job, ctx: claimed, seconds: 0.1 } });
    expect((await answer)?.row).to.include({ state: 'completed', attempt: 1 });
  });

  it('runs interceptors around the settlement, the first registered outermost', async () => {
    const order: string[] = [];
    const around = (name: string) => ({
      async settle(call: SettlementCall, next: (call: SettlementCall) => Promise<SettledResult>): Promise<SettledResult> {
        order.push(`${name} in`);
        const result = await next(call);
        order.push(`${name} out`);
        return result;
      },
    });
    const settle = intercepted([around('a'), around('b')], () => {
      order.push('settle');
      return Promise.resolve<SettledResult>({ kind: 'handed-back', settled: 'acked' });
    });
    await settle({ delivery, input: { kind: 'suspect', job: jobAt(1) } });
    expect(order).to.deep.equal(['a in', 'b in', 'settle', 'b out', 'a out']);
  });
});
