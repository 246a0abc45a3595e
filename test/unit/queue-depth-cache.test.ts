import { expect } from 'chai';
import { QueueDepthCache } from '../../src/observability/queue-depth-cache.js';
import type { QueueDepthSample } from '../../src/observability/stage-metrics.js';

const sample = (depth: number): QueueDepthSample => ({ stage: 's', queue: 'q', tenant: '', physicalQueue: 'p.q', depth });

describe('QueueDepthCache', () => {
  it('serves the last reading at once, and nothing to trust once a reading fails, times out or grows stale', async () => {
    let now = 0;
    let next: () => Promise<QueueDepthSample[]> = () => Promise.resolve([sample(3)]);
    const cache = new QueueDepthCache(
      () => next(),
      1000,
      20,
      () => now,
    );
    expect(cache.read(), 'nothing read yet').to.deep.equal([]);
    await cache.refresh();
    expect(cache.read()).to.deep.equal([sample(3)]);

    next = () => Promise.reject(new Error('channel closed'));
    await cache.refresh();
    expect(() => cache.read()).to.throw('channel closed');

    let answer!: (samples: QueueDepthSample[]) => void;
    next = () => new Promise((resolve) => (answer = resolve));
    const began = Date.now();
    await cache.refresh();
    expect(Date.now() - began, 'bounded by the timeout').to.be.below(500);
    expect(() => cache.read()).to.throw(/did not answer within 20 ms/);
    let calls = 0;
    const pending = next;
    next = () => {
      calls++;
      return pending();
    };
    await cache.refresh();
    expect(calls, 'no reading on top of the one still under way').to.equal(0);
    answer([sample(1)]);
    await new Promise((resolve) => setImmediate(resolve));
    next = () => Promise.resolve([sample(5)]);
    await cache.refresh();
    expect(cache.read()).to.deep.equal([sample(5)]);

    now += 3001;
    expect(() => cache.read()).to.throw(/old/);
  });
});
