import { expect } from 'chai';
import { isTimestamp } from '../../src/util/timestamp.js';

describe('RFC 3339 timestamps (isTimestamp)', () => {
  it('takes what toISOString writes, and other RFC 3339 forms with a time zone', () => {
    for (const text of [
      new Date().toISOString(),
      '2024-02-29T00:00:00.000Z',
      '2026-11-22T06:00:00Z',
      '2026-11-22t06:00:00.123456z',
      '2026-11-22T06:00:00+01:00',
      '2026-11-22 06:00:00-05:30',
    ]) {
      expect(isTimestamp(text), text).to.equal(true);
    }
  });

  it('refuses days that are not on the calendar, hour 24, no time zone, and anything not a string', () => {
    for (const value of [
      '2026-02-29T00:00:00.000Z',
      '2026-02-29T00:00:00Z',
      '2026-04-31T00:00:00.000Z',
      '2026-13-01T00:00:00Z',
      '2026-11-22T24:00:00.000Z',
      '2026-11-22T24:00:00Z',
      '2026-11-22T06:60:00.000Z',
      '2026-11-22T06:00:00',
      '2026-11-22T06:00:00.000+',
      'tomorrow',
      1795000000000,
      null,
    ]) {
      expect(isTimestamp(value), String(value)).to.equal(false);
    }
  });
});
