import { expect } from 'chai';
import { amqpPriority, DEFAULT_AMQP_PRIORITY } from '../../src/job/amqp-priority.js';
import { createJob } from '../../src/job/envelope.js';
import { toWire } from '../../src/job/amqp-mapping.js';

describe('the AMQP priority of an OJS priority', () => {
  it('never puts a higher OJS priority on a lower level, from -100 to 100 and beyond', () => {
    for (let p = -150; p < 150; p++) {
      const level = amqpPriority(p);
      expect(level, `priority ${p}`).to.be.within(0, 9);
      expect(amqpPriority(p + 1), `priority ${p + 1}`).to.be.at.least(level);
    }
  });

  it('keeps the named levels apart: LOW -10 below NORMAL 0 below HIGH 10', () => {
    expect(amqpPriority(-10)).to.be.below(amqpPriority(0));
    expect(amqpPriority(0)).to.be.below(amqpPriority(10));
    expect(amqpPriority(-100)).to.equal(0);
    expect(amqpPriority(100)).to.equal(9);
  });

  it('splits where a RabbitMQ 4.0 quorum queue does: every positive priority above 4, 0 and below at 4 or under', () => {
    expect(amqpPriority(0)).to.equal(4);
    expect(amqpPriority(1)).to.equal(5);
    expect(amqpPriority(-1)).to.equal(3);
  });

  it('is set on every message: a job without a priority is 0, above the negative ones', () => {
    const plain = toWire(createJob({ type: 't.x' }, { queue: 'q' }), { tenantHeader: 'tenant' });
    expect(plain.options.priority).to.equal(DEFAULT_AMQP_PRIORITY);
    const low = toWire(createJob({ type: 't.x', priority: -10 }, { queue: 'q' }), { tenantHeader: 'tenant' });
    expect(low.options.priority).to.be.below(plain.options.priority as number);
  });
});
