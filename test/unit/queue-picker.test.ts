import { expect } from 'chai';
import { MAX_PICKERS, PickerCache } from '../../src/queue-pools/picker-cache.js';
import { QueuePicker } from '../../src/queue-pools/queue-picker.js';
import { MAX_POOL_QUEUES, readPoolPlan } from '../../src/queue-pools/queue-pool.js';

const always = (): boolean => true;

function picks(picker: QueuePicker, n: number, hasJob: (queue: string) => boolean = always): string[] {
  return Array.from({ length: n }, () => picker.next(hasJob) ?? '-');
}

function counts(queues: string[]): Record<string, number> {
  const seen: Record<string, number> = {};
  for (const queue of queues) seen[queue] = (seen[queue] ?? 0) + 1;
  return seen;
}

describe('QueuePicker: the queue of each dispatch of a fetch over several queues', () => {
  it('weighted: serves each queue its weight in every cycle of the weights sum, spread out', () => {
    const picker = new QueuePicker({ strategy: 'weighted', queues: ['a', 'b'], weights: { a: 3, b: 1 } });
    const first = picks(picker, 8);
    expect(first).to.deep.equal(['a', 'a', 'b', 'a', 'a', 'a', 'b', 'a']);
    expect(counts(picks(picker, 400))).to.deep.equal({ a: 300, b: 100 });
  });

  it('weighted: a queue of weight 1 among 1000 is served within every 1001 dispatches', () => {
    const picker = new QueuePicker({ strategy: 'weighted', queues: ['big', 'small'], weights: { big: 1000, small: 1 } });
    const run = picks(picker, 3003);
    const gaps: number[] = [];
    let last = -1;
    run.forEach((queue, i) => {
      if (queue !== 'small') return;
      gaps.push(i - last);
      last = i;
    });
    expect(gaps.length).to.equal(3);
    expect(Math.max(...gaps)).to.be.at.most(1001);
  });

  it('weighted: skips a queue with no job, which gains no credit meanwhile (no burst when it fills)', () => {
    const picker = new QueuePicker({ strategy: 'weighted', queues: ['a', 'b'], weights: { a: 1, b: 1 } });
    expect(picks(picker, 10, (queue) => queue === 'a')).to.deep.equal(Array(10).fill('a'));
    const after = picks(picker, 10);
    expect(counts(after)).to.deep.equal({ a: 5, b: 5 });
    expect(after.join('')).not.to.include('bb');
  });

  it('weighted: three queues 5:3:1 get 5/9, 3/9 and 1/9', () => {
    const picker = new QueuePicker({ strategy: 'weighted', queues: ['c', 'd', 'l'], weights: { c: 5, d: 3, l: 1 } });
    expect(counts(picks(picker, 900))).to.deep.equal({ c: 500, d: 300, l: 100 });
  });

  it('round-robin: the queues in turn, skipping an empty one, the turn kept between calls', () => {
    const picker = new QueuePicker({ strategy: 'round-robin', queues: ['a', 'b', 'c'], weights: {} });
    expect(picks(picker, 4)).to.deep.equal(['a', 'b', 'c', 'a']);
    expect(picks(picker, 4, (queue) => queue !== 'c')).to.deep.equal(['b', 'a', 'b', 'a']);
  });

  it('strict: the first queue in order that has a job', () => {
    const picker = new QueuePicker({ strategy: 'strict', queues: ['a', 'b'], weights: {} });
    expect(picks(picker, 2)).to.deep.equal(['a', 'a']);
    expect(picks(picker, 1, (queue) => queue === 'b')).to.deep.equal(['b']);
  });

  it('answers undefined when no queue has a job', () => {
    for (const strategy of ['strict', 'round-robin', 'weighted'] as const) {
      expect(
        new QueuePicker({ strategy, queues: ['a'], weights: { a: 1 } }).next(() => false),
        strategy,
      ).to.equal(undefined);
    }
  });
});

describe('readPoolPlan: a queue pool definition', () => {
  it("reads the spec's list with weights beside it, and an object of queues to { weight }", () => {
    expect(readPoolPlan({ strategy: 'weighted', queues: ['a', 'b'], weights: { a: 3 } })).to.deep.equal({
      strategy: 'weighted',
      queues: ['a', 'b'],
      weights: { a: 3, b: 1 },
    });
    expect(readPoolPlan({ strategy: 'weighted', queues: { hi: { weight: 70 }, lo: { weight: 30 } } })).to.deep.equal({
      strategy: 'weighted',
      queues: ['hi', 'lo'],
      weights: { hi: 70, lo: 30 },
    });
    expect(readPoolPlan({ queues: ['a'] }).strategy).to.equal('round-robin');
  });

  it('refuses bad input naming the field', () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ queues: 'a' }, /"queues"/],
      [{ queues: [] }, /"queues" must name 1 to/],
      [{ queues: Array.from({ length: MAX_POOL_QUEUES + 1 }, (_, i) => `q${i}`) }, /"queues" must name 1 to/],
      [{ queues: ['Bad Name'] }, /"queues": "Bad Name" is not a queue name/],
      [{ queues: ['a'], strategy: 'fastest' }, /"strategy" must be one of/],
      [{ queues: ['a'], strategy: 'weighted', weights: { a: 0 } }, /"weights.a" must be an integer/],
      [{ queues: ['a'], strategy: 'weighted', weights: { b: 2 } }, /"weights.b": the queue is not in "queues"/],
      [{ queues: { a: 3 } }, /"queues.a" must be an object/],
      [{ queues: { a: { weight: 1.5 } }, strategy: 'weighted' }, /"weights.a" must be an integer/],
    ];
    for (const [body, message] of cases) expect(() => readPoolPlan(body), JSON.stringify(body)).to.throw(message);
  });
});

describe('PickerCache', () => {
  it('keeps a turn per plan and scope, and holds at most MAX_PICKERS', () => {
    const cache = new PickerCache();
    const plan = { strategy: 'round-robin' as const, queues: ['a', 'b'], weights: { a: 1, b: 1 } };
    expect(cache.of(plan, 'acme').next(always)).to.equal('a');
    expect(cache.of(plan, 'acme').next(always)).to.equal('b');
    expect(cache.of(plan, 'globex').next(always)).to.equal('a');
    for (let i = 0; i < MAX_PICKERS + 10; i++) cache.of(plan, `t${i}`);
    expect(cache.size).to.equal(MAX_PICKERS);
  });
});
