import { expect } from 'chai';
import { reconnectDelayMs } from '../../src/broker/reconnect-backoff.js';

const SETTINGS = { initialDelay: 1, maxDelay: 30 };
/** The jitter factor is 0.5 + random: 0.5 makes it exactly 1. */
const NO_JITTER = 0.5;
const RANDOMS = [0, 0.1, 0.25, 0.4999, 0.5, 0.75, 0.9, 0.999999, 1 - Number.EPSILON];

describe('reconnectDelayMs', () => {
  it('waits initialDelay before the first retry (attempt 0)', () => {
    expect(reconnectDelayMs(0, SETTINGS, NO_JITTER)).to.equal(1000);
    expect(reconnectDelayMs(0, { initialDelay: 0.25, maxDelay: 30 }, NO_JITTER)).to.equal(250);
  });

  it('doubles with every attempt', () => {
    expect([0, 1, 2, 3, 4].map((attempt) => reconnectDelayMs(attempt, SETTINGS, NO_JITTER))).to.deep.equal([1000, 2000, 4000, 8000, 16000]);
  });

  it('stops growing at maxDelay, however many attempts', () => {
    for (const attempt of [5, 6, 10, 100, 2000])
      expect(reconnectDelayMs(attempt, SETTINGS, NO_JITTER), `attempt ${attempt}`).to.equal(30000);
  });

  it('never exceeds maxDelay, for any random in [0, 1) and any attempt', () => {
    for (const settings of [SETTINGS, { initialDelay: 0.1, maxDelay: 2 }, { initialDelay: 5, maxDelay: 5 }]) {
      for (let attempt = 0; attempt <= 40; attempt++) {
        for (const random of RANDOMS) {
          const delay = reconnectDelayMs(attempt, settings, random);
          expect(delay, `attempt ${attempt}, random ${random}, ${JSON.stringify(settings)}`).to.be.at.most(settings.maxDelay * 1000);
        }
      }
    }
  });

  it('spreads a delay below the cap over [0.5, 1.5) of it', () => {
    expect(reconnectDelayMs(2, SETTINGS, 0)).to.equal(2000);
    expect(reconnectDelayMs(2, SETTINGS, 0.25)).to.equal(3000);
    expect(reconnectDelayMs(2, SETTINGS, 0.75)).to.equal(5000);
    const top = reconnectDelayMs(2, SETTINGS, 1 - Number.EPSILON);
    expect(top).to.be.below(6000).and.above(5999);
  });

  it('applies the jitter before the cap: a base past maxDelay still spreads below it', () => {
    // Base 32 s, past the 30 s cap: jitter first, then the cap.
    expect(reconnectDelayMs(5, SETTINGS, 0)).to.equal(16000);
    expect(reconnectDelayMs(5, SETTINGS, 0.25)).to.equal(24000);
    expect(reconnectDelayMs(5, SETTINGS, 0.9)).to.equal(30000);
  });

  it('uses Math.random when no random is given, within the bounds', () => {
    for (let i = 0; i < 200; i++) expect(reconnectDelayMs(3, SETTINGS)).to.be.at.least(4000).and.below(12000);
    for (let i = 0; i < 200; i++) expect(reconnectDelayMs(30, SETTINGS)).to.be.at.least(15000).and.at.most(30000);
  });
});
