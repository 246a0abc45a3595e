import { expect } from 'chai';
import { latestBetween, parseCron } from '../../src/cron/cron-expression.js';
import { checkTimeZone, clockOf } from '../../src/cron/time-zone.js';

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

/** The first `count` occurrences after `from` in `zone`. */
function occurrences(expression: string, from: string, count: number, zone = 'UTC', anchor = 0): string[] {
  const rule = parseCron(expression);
  const clock = clockOf(zone);
  const found: string[] = [];
  let after = at(from);
  for (let i = 0; i < count; i++) {
    const next = rule.next(after, clock, anchor);
    if (next === undefined) break;
    found.push(iso(next) as string);
    after = next;
  }
  return found;
}

describe('cron expressions (parseCron)', () => {
  it('fires 5-field expressions at second 0 of the matching minutes', () => {
    expect(occurrences('*/15 * * * *', '2026-03-01T10:07:30Z', 3)).to.deep.equal([
      '2026-03-01T10:15:00.000Z',
      '2026-03-01T10:30:00.000Z',
      '2026-03-01T10:45:00.000Z',
    ]);
    expect(occurrences('0 9 * * MON-FRI', '2026-03-06T09:00:00Z', 2)).to.deep.equal([
      '2026-03-09T09:00:00.000Z',
      '2026-03-10T09:00:00.000Z',
    ]);
    expect(occurrences('30 2 1,15 jan,jul *', '2026-01-01T03:00:00Z', 3)).to.deep.equal([
      '2026-01-15T02:30:00.000Z',
      '2026-07-01T02:30:00.000Z',
      '2026-07-15T02:30:00.000Z',
    ]);
  });

  it('takes a sixth field as seconds, first', () => {
    expect(occurrences('*/20 * * * * *', '2026-03-01T10:00:05Z', 3)).to.deep.equal([
      '2026-03-01T10:00:20.000Z',
      '2026-03-01T10:00:40.000Z',
      '2026-03-01T10:01:00.000Z',
    ]);
  });

  it('reads 0 and 7 as Sunday, and either day field matching when both are restricted (POSIX)', () => {
    expect(occurrences('0 0 * * 7', '2026-03-01T12:00:00Z', 1)).to.deep.equal(['2026-03-08T00:00:00.000Z']);
    expect(occurrences('0 0 * * 0', '2026-03-01T12:00:00Z', 1)).to.deep.equal(['2026-03-08T00:00:00.000Z']);
    // The 13th or any Friday.
    expect(occurrences('0 0 13 * 5', '2026-03-01T00:00:00Z', 3)).to.deep.equal([
      '2026-03-06T00:00:00.000Z',
      '2026-03-13T00:00:00.000Z',
      '2026-03-20T00:00:00.000Z',
    ]);
  });

  it('supports L, L-n, LW, nW and n#k, nL (OJS cron 3.3)', () => {
    expect(occurrences('0 23 L * *', '2026-01-31T23:30:00Z', 2)).to.deep.equal(['2026-02-28T23:00:00.000Z', '2026-03-31T23:00:00.000Z']);
    expect(occurrences('0 0 L-2 2 *', '2028-01-01T00:00:00Z', 1)).to.deep.equal(['2028-02-27T00:00:00.000Z']);
    // May 2026 ends on a Sunday: its last weekday is Friday the 29th.
    expect(occurrences('0 0 LW * *', '2026-05-01T00:00:00Z', 1)).to.deep.equal(['2026-05-29T00:00:00.000Z']);
    // 2026-02-15 is a Sunday: the nearest weekday is Monday the 16th; 2026-08-01 a Saturday, not leaving the month: Monday the 3rd.
    expect(occurrences('0 0 15W * *', '2026-02-01T00:00:00Z', 1)).to.deep.equal(['2026-02-16T00:00:00.000Z']);
    expect(occurrences('0 0 1W * *', '2026-07-31T00:00:00Z', 1)).to.deep.equal(['2026-08-03T00:00:00.000Z']);
    expect(occurrences('0 0 * * FRI#3', '2026-03-01T00:00:00Z', 2)).to.deep.equal(['2026-03-20T00:00:00.000Z', '2026-04-17T00:00:00.000Z']);
    expect(occurrences('0 0 * * 5L', '2026-03-01T00:00:00Z', 1)).to.deep.equal(['2026-03-27T00:00:00.000Z']);
  });

  it('expands the @ aliases', () => {
    const from = '2026-03-04T10:20:00Z';
    expect(occurrences('@hourly', from, 1)).to.deep.equal(['2026-03-04T11:00:00.000Z']);
    expect(occurrences('@daily', from, 1)).to.deep.equal(['2026-03-05T00:00:00.000Z']);
    expect(occurrences('@midnight', from, 1)).to.deep.equal(['2026-03-05T00:00:00.000Z']);
    expect(occurrences('@weekly', from, 1)).to.deep.equal(['2026-03-08T00:00:00.000Z']);
    expect(occurrences('@monthly', from, 1)).to.deep.equal(['2026-04-01T00:00:00.000Z']);
    expect(occurrences('@yearly', from, 1)).to.deep.equal(['2027-01-01T00:00:00.000Z']);
    expect(occurrences('@annually', from, 1)).to.deep.equal(['2027-01-01T00:00:00.000Z']);
  });

  it('counts @every from its anchor, in Go durations or ISO 8601', () => {
    const anchor = at('2026-03-04T10:00:07Z');
    expect(occurrences('@every 1h30m', '2026-03-04T10:00:00Z', 2, 'UTC', anchor)).to.deep.equal([
      '2026-03-04T11:30:07.000Z',
      '2026-03-04T13:00:07.000Z',
    ]);
    expect(occurrences('@every PT2S', '2026-03-04T10:00:10Z', 1, 'UTC', anchor)).to.deep.equal(['2026-03-04T10:00:11.000Z']);
  });

  it('refuses what OJS cron 3.5 calls invalid, saying why', () => {
    const cases: Array<[string, RegExp]> = [
      ['', /empty/],
      ['not a valid cron', /4 fields/],
      ['0 0 0 0 0 0 0', /7 fields/],
      ['99 25 32 13 8', /minute field: 99 is out of range/],
      ['0 25 * * *', /hour field: 25/],
      ['0 0 32 * *', /day of month field: 32/],
      ['0 0 * 13 *', /month field: 13/],
      ['0 0 * * 8', /day of week field: 8/],
      ['*/0 * * * *', /step of 0/],
      ['5-1 * * * *', /starts after it ends/],
      ['1-2-3 * * * *', /not a range/],
      ['1,,2 * * * *', /empty list item/],
      ['0 0 30 2 *', /never fires/],
      ['@sometimes', /unknown alias/],
      ['@every 500ms', /shorter than 1 s/],
      ['@every soon', /takes a duration/],
      ['0 0 * * 5#6', /1 to 5/],
      ['0 0 3L * *', /L and W take the forms/],
    ];
    for (const [expression, reason] of cases) {
      expect(() => parseCron(expression), expression)
        .to.throw(reason)
        .with.property('code', 'INVALID_REQUEST');
    }
  });

  it('finds the latest occurrence of a pause, however long, for the one catch-up', () => {
    const rule = parseCron('*/5 * * * *');
    const clock = clockOf('UTC');
    expect(iso(latestBetween(rule, at('2026-03-01T00:00:00Z'), at('2026-03-09T10:07:00Z'), clock, 0))).to.equal('2026-03-09T10:05:00.000Z');
    expect(latestBetween(rule, at('2026-03-09T10:05:00Z'), at('2026-03-09T10:09:59Z'), clock, 0)).to.equal(undefined);
    const monthly = parseCron('0 3 1 * *');
    expect(iso(latestBetween(monthly, at('2025-01-01T00:00:00Z'), at('2026-03-20T00:00:00Z'), clock, 0))).to.equal(
      '2026-03-01T03:00:00.000Z',
    );
  });
});

describe('time zones and daylight saving time (OJS cron 5)', () => {
  it('reads wall-clock time in the zone: 9:00 in Tokyo and in New York are different instants', () => {
    expect(occurrences('0 9 * * *', '2026-01-10T12:00:00Z', 1, 'Asia/Tokyo')).to.deep.equal(['2026-01-11T00:00:00.000Z']);
    expect(occurrences('0 9 * * *', '2026-01-10T12:00:00Z', 1, 'America/New_York')).to.deep.equal(['2026-01-10T14:00:00.000Z']);
    // Summer time: 9:00 EDT is 13:00 UTC.
    expect(occurrences('0 9 * * *', '2026-07-10T12:00:00Z', 1, 'America/New_York')).to.deep.equal(['2026-07-10T13:00:00.000Z']);
  });

  it('does not fire a time the spring-forward skips (America/New_York, 2026-03-08 02:00 -> 03:00)', () => {
    expect(occurrences('30 2 * * *', '2026-03-06T12:00:00Z', 3, 'America/New_York')).to.deep.equal([
      '2026-03-07T07:30:00.000Z', // 02:30 EST
      '2026-03-09T06:30:00.000Z', // 02:30 EDT: the 8th has no 02:30
      '2026-03-10T06:30:00.000Z',
    ]);
    const gaps: number[] = [];
    parseCron('30 2 * * *').next(at('2026-03-07T12:00:00Z'), clockOf('America/New_York'), 0, gaps);
    expect(gaps.map(iso)).to.deep.equal(['2026-03-08T02:30:00.000Z']); // the wall time, naive
  });

  it('fires a time the fall-back repeats once, at its first instant (America/New_York, 2026-11-01 02:00 -> 01:00)', () => {
    expect(occurrences('30 1 * * *', '2026-10-31T12:00:00Z', 2, 'America/New_York')).to.deep.equal([
      '2026-11-01T05:30:00.000Z', // 01:30 EDT; 01:30 EST (06:30Z) does not fire
      '2026-11-02T06:30:00.000Z',
    ]);
    // Hourly: 01:00 fires once, then 02:00 EST.
    expect(occurrences('0 * * * *', '2026-11-01T04:30:00Z', 3, 'America/New_York')).to.deep.equal([
      '2026-11-01T05:00:00.000Z', // 01:00 EDT
      '2026-11-01T07:00:00.000Z', // 02:00 EST
      '2026-11-01T08:00:00.000Z',
    ]);
    // Asked from inside the repeated hour (after its first pass), 01:30 is behind: tomorrow's.
    expect(occurrences('30 1 * * *', '2026-11-01T06:10:00Z', 1, 'America/New_York')).to.deep.equal(['2026-11-02T06:30:00.000Z']);
  });

  it('handles Europe/Copenhagen: spring-forward 2026-03-29 02:00 -> 03:00, fall-back 2026-10-25 03:00 -> 02:00', () => {
    expect(occurrences('30 2 * * *', '2026-03-28T00:00:00Z', 2, 'Europe/Copenhagen')).to.deep.equal([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-30T00:30:00.000Z', // 02:30 CEST: the 29th has none
    ]);
    expect(occurrences('30 2 * * *', '2026-10-24T12:00:00Z', 2, 'Europe/Copenhagen')).to.deep.equal([
      '2026-10-25T00:30:00.000Z', // 02:30 CEST, the first of the two
      '2026-10-26T01:30:00.000Z', // 02:30 CET
    ]);
    // Every 15 minutes across the fall-back: 02:45 CEST, then 03:00 CET: 02:00-02:45 CET do not fire again.
    expect(occurrences('*/15 * * * *', '2026-10-25T00:40:00Z', 3, 'Europe/Copenhagen')).to.deep.equal([
      '2026-10-25T00:45:00.000Z',
      '2026-10-25T02:00:00.000Z',
      '2026-10-25T02:15:00.000Z',
    ]);
  });

  it('accepts IANA names and refuses offsets and abbreviations (OJS cron 5.1)', () => {
    for (const zone of ['UTC', 'Europe/Copenhagen', 'America/New_York', 'Asia/Kolkata', 'America/Argentina/Buenos_Aires']) {
      expect(checkTimeZone(zone)).to.equal(zone);
    }
    for (const zone of ['+05:00', '-08:00', 'UTC+5', 'GMT-3', 'Etc/GMT+5', 'EST', 'PST', 'CET', 'Mars/Olympus_Mons', '']) {
      expect(() => checkTimeZone(zone), zone)
        .to.throw()
        .with.property('code', 'INVALID_REQUEST');
    }
  });
});
