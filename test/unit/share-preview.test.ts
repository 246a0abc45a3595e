import { expect } from 'chai';
import { previewShare } from '../../src/http-api/share-preview.js';

describe('previewShare: what a pooled share gives each tenant while every tenant has work', () => {
  it('shares the slots and the starts by weight', () => {
    const preview = previewShare(8, [
      { tenant: 'acme', weight: 3, minConcurrency: 0 },
      { tenant: 'globex', weight: 1, minConcurrency: 0 },
    ]);
    expect(preview.get('acme')).to.deep.equal({ slots: 6, ratio: 0.75 });
    expect(preview.get('globex')).to.deep.equal({ slots: 2, ratio: 0.25 });
  });

  // A tenant at its cap is out of the share's heap: the slot its job frees goes to the next in
  // turn before it asks again, so it waits for one more job end each time (0.9 of its 1 slot).
  it('passes over a tenant at its cap and lets the others share what it leaves', () => {
    const preview = previewShare(9, [
      { tenant: 'acme', weight: 3, minConcurrency: 0 },
      { tenant: 'globex', weight: 1, minConcurrency: 0 },
      { tenant: 'initech', weight: 1, maxConcurrency: 1, minConcurrency: 0 },
    ]);
    expect([...preview].map(([tenant, { slots }]) => [tenant, slots])).to.deep.equal([
      ['acme', 6.1],
      ['globex', 2],
      ['initech', 0.9],
    ]);
  });

  it('gives a tenant its minimum when its weight alone would give it less', () => {
    const seats = ['a', 'b', 'c', 'd'].map((tenant) => ({ tenant, weight: 1, minConcurrency: 0 }));
    const preview = previewShare(8, [...seats, { tenant: 'acme', weight: 1, minConcurrency: 4 }]);
    expect(preview.get('acme')).to.deep.equal({ slots: 4, ratio: 0.5 });
    expect(preview.get('a')).to.deep.equal({ slots: 1, ratio: 0.13 });
  });
});
