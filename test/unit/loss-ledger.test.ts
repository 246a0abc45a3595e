import { expect } from 'chai';
import { EventLoopWatch } from '../../src/runner/event-loop-watch.js';
import { LossLedger } from '../../src/runner/loss-ledger.js';

/** A watch whose answer the test sets. */
function watch(stalled: boolean): EventLoopWatch {
  return { stalledWithin: () => stalled, close: () => undefined } as unknown as EventLoopWatch;
}

describe('LossLedger: losses this process knows are not crashes', () => {
  it('forgives each recorded delivery once, and nothing else', () => {
    const ledger = new LossLedger(watch(false), 125_000);
    ledger.record(['a', 'b']);
    expect(ledger.forgive('a')).to.equal(true);
    expect(ledger.forgive('a'), 'once').to.equal(false);
    expect(ledger.forgive('c')).to.equal(false);
    expect(ledger.forgive(undefined)).to.equal(false);
    expect(ledger.forgive('b')).to.equal(true);
  });

  it('records nothing after an event-loop stall: the jobs in hand are blamed', () => {
    const ledger = new LossLedger(watch(true), 125_000);
    ledger.record(['a']);
    expect(ledger.forgive('a')).to.equal(false);
  });
});

describe('LossLedger: deliveries lost on the way, never received', () => {
  it('forgives redelivered strangers at the head of the queue, up to what the broker could have sent', () => {
    const ledger = new LossLedger(watch(false), 125_000);
    ledger.record(['a'], new Map([['q', 2]]));
    ledger.arrived('q', 'a', true);
    ledger.arrived('q', 'x', true);
    ledger.arrived('q', 'y', true);
    ledger.arrived('q', 'z', true);
    expect(['a', 'x', 'y', 'z'].map((id) => ledger.forgive(id))).to.deep.equal([true, true, true, false]);
  });

  it('ends the head at the first delivery that is not redelivered: what follows was with another process', () => {
    const ledger = new LossLedger(watch(false), 125_000);
    ledger.record([], new Map([['q', 5]]));
    ledger.arrived('q', 'x', true);
    ledger.arrived('q', 'fresh', false);
    ledger.arrived('q', 'y', true);
    expect(['x', 'y'].map((id) => ledger.forgive(id))).to.deep.equal([true, false]);
  });

  it('keeps the queues apart, and records nothing after a stall', () => {
    const ledger = new LossLedger(watch(false), 125_000);
    ledger.record([], new Map([['q', 1]]));
    ledger.arrived('other', 'x', true);
    expect(ledger.forgive('x')).to.equal(false);
    const stalled = new LossLedger(watch(true), 125_000);
    stalled.record([], new Map([['q', 1]]));
    stalled.arrived('q', 'y', true);
    expect(stalled.forgive('y')).to.equal(false);
  });
});

describe('EventLoopWatch', () => {
  it('sees a loop blocked right now as a stall, before its overdue tick runs', () => {
    const loop = new EventLoopWatch();
    try {
      const start = Date.now();
      expect(loop.stalledWithin(10_000, start)).to.equal(false);
      // As if the loop had been blocked for 2 s with no tick: a close handler running now.
      expect(loop.stalledWithin(10_000, start + 2000)).to.equal(true);
    } finally {
      loop.close();
    }
  });

  it('remembers a stall it ticked through for the window given', async () => {
    const loop = new EventLoopWatch();
    try {
      const until = Date.now() + 1600;
      while (Date.now() < until) {
        // Block the loop, as a CPU-bound handler would.
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(loop.stalledWithin(10_000)).to.equal(true);
      expect(loop.stalledWithin(0)).to.equal(false);
    } finally {
      loop.close();
    }
  });
});
