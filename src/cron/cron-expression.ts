import { StagecoachError } from '../errors/errors.js';
import { parseDuration } from '../util/duration.js';
import {
  dayOfMonthMatches,
  dayOfWeekMatches,
  HOUR,
  MINUTE,
  MONTH,
  parseDayOfMonth,
  parseDayOfWeek,
  parseValues,
  SECOND,
  type DayOfMonthField,
  type DayOfWeekField,
  type ValueSet,
} from './cron-fields.js';
import { clockOf, type ZoneClock } from './time-zone.js';

/** The aliases of OJS cron section 4. */
const ALIASES: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/** `@every` no shorter than this: OJS cron 7.3 evaluates schedules at most once a second. */
export const MIN_INTERVAL_MS = 1000;
/** How far ahead an occurrence is looked for before an expression is said never to fire (a full calendar cycle). */
const SEARCH_YEARS = 28;

/**
 * A schedule's rule: when it fires. Instants are epoch ms; `anchor` is where an interval
 * (`@every`) counts from (the registration), ignored by calendar rules.
 */
export interface CronRule {
  readonly expression: string;
  /** The rule is an interval (`@every`): time zones do not apply. */
  readonly interval: boolean;
  /**
   * The first occurrence strictly after `after`, or undefined when there is none. A calendar rule
   * reads wall-clock time in `clock`'s zone: a wall time that does not exist there (a
   * spring-forward gap) is not an occurrence, and is pushed on `gaps` (naive ms) when given; a
   * wall time that exists twice (a fall-back hour) is an occurrence at its first instant only.
   */
  next(after: number, clock: ZoneClock, anchor: number, gaps?: number[]): number | undefined;
}

function invalid(expression: string, reason: string): StagecoachError {
  return new StagecoachError('INVALID_REQUEST', `cron expression "${expression}": ${reason}`);
}

/**
 * Reads a cron expression (OJS cron sections 3 and 4): 5 fields (minute hour day-of-month month
 * day-of-week), 6 with seconds first, the `@` aliases, or `@every <duration>` (Go's form, `1h30m`,
 * `45s`, or ISO 8601, `PT1H30M`; at least 1 s). It is checked whole, and must fire at least once
 * in 28 years (`0 0 30 2 *` never does).
 * @throws StagecoachError INVALID_REQUEST naming what is wrong.
 */
export function parseCron(expression: string): CronRule {
  if (typeof expression !== 'string' || expression.trim() === '') throw invalid(String(expression), 'it is empty');
  const text = expression.trim().replace(/\s+/g, ' ');
  if (text.toLowerCase().startsWith('@every'))
    return new IntervalRule(expression, intervalOf(text.slice('@every'.length).trim(), expression));
  const expanded = text.startsWith('@') ? ALIASES[text.toLowerCase()] : text;
  if (expanded === undefined) {
    throw invalid(expression, `unknown alias (the aliases are ${Object.keys(ALIASES).join(', ')} and @every <duration>)`);
  }
  const fields = expanded.split(' ');
  if (fields.length !== 5 && fields.length !== 6) {
    throw invalid(
      expression,
      `it has ${fields.length} field${fields.length === 1 ? '' : 's'}; a cron expression has 5 (minute hour day-of-month month day-of-week) or 6 (second first)`,
    );
  }
  const [second, minute, hour, dom, month, dow] = fields.length === 6 ? fields : ['0', ...fields];
  const rule = new CalendarRule(
    expression,
    fields.length === 6,
    parseValues(second as string, SECOND, expression),
    parseValues(minute as string, MINUTE, expression),
    parseValues(hour as string, HOUR, expression),
    parseDayOfMonth(dom as string, expression),
    parseValues(month as string, MONTH, expression),
    parseDayOfWeek(dow as string, expression),
  );
  if (rule.next(Date.now(), clockOf('UTC'), 0) === undefined)
    throw invalid(expression, `it never fires (no such date in ${SEARCH_YEARS} years)`);
  return rule;
}

/** Milliseconds of an `@every` duration: Go's `1h30m`, `45s`, `500ms`, or ISO 8601. */
function intervalOf(text: string, expression: string): number {
  let ms: number | undefined;
  if (/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(text)) {
    ms = 0;
    for (const [, amount, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
      ms += Number(amount) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as 'ms' | 's' | 'm' | 'h'];
    }
  } else ms = parseDuration(text);
  if (ms === undefined || text === '') throw invalid(expression, `"@every" takes a duration such as 30m, 1h30m or PT5M, got "${text}"`);
  if (ms < MIN_INTERVAL_MS) throw invalid(expression, `"@every ${text}" is shorter than 1 s, the finest a schedule is evaluated at`);
  return Math.round(ms);
}

/** `@every`: anchor + k * interval, k >= 1. */
class IntervalRule implements CronRule {
  readonly interval = true;
  constructor(
    readonly expression: string,
    private readonly everyMs: number,
  ) {}

  next(after: number, _clock: ZoneClock, anchor: number): number {
    if (after < anchor) return anchor + this.everyMs;
    return anchor + (Math.floor((after - anchor) / this.everyMs) + 1) * this.everyMs;
  }
}

class CalendarRule implements CronRule {
  readonly interval = false;
  private readonly step: number;

  constructor(
    readonly expression: string,
    seconds: boolean,
    private readonly second: ValueSet,
    private readonly minute: ValueSet,
    private readonly hour: ValueSet,
    private readonly dom: DayOfMonthField,
    private readonly month: ValueSet,
    private readonly dow: DayOfWeekField,
  ) {
    this.step = seconds ? 1000 : 60_000;
  }

  next(after: number, clock: ZoneClock, _anchor: number, gaps?: number[]): number | undefined {
    let wall = Math.floor(clock.wallOf(after) / this.step) * this.step + this.step;
    const lastYear = new Date(wall).getUTCFullYear() + SEARCH_YEARS;
    for (;;) {
      const found = this.nextWall(wall, lastYear);
      if (found === undefined) return undefined;
      const instants = clock.instantsOf(found);
      if (instants.length === 0) gaps?.push(found);
      else if ((instants[0] as number) > after) return instants[0];
      wall = found + this.step;
    }
  }

  /** The first naive wall time at or after `start` whose fields match, searched field by field. */
  private nextWall(start: number, lastYear: number): number | undefined {
    let t = start;
    for (;;) {
      const date = new Date(t);
      const year = date.getUTCFullYear();
      if (year > lastYear) return undefined;
      const month = date.getUTCMonth() + 1;
      if (this.month[month] !== true) {
        t = Date.UTC(year, month, 1);
        continue;
      }
      const day = date.getUTCDate();
      if (!this.dayMatches(year, month, day)) {
        t = Date.UTC(year, month - 1, day + 1);
        continue;
      }
      const hour = date.getUTCHours();
      if (this.hour[hour] !== true) {
        t = Date.UTC(year, month - 1, day, hour + 1);
        continue;
      }
      const minute = date.getUTCMinutes();
      if (this.minute[minute] !== true) {
        t = Date.UTC(year, month - 1, day, hour, minute + 1);
        continue;
      }
      const second = date.getUTCSeconds();
      if (this.second[second] !== true) {
        t = Date.UTC(year, month - 1, day, hour, minute, second + 1);
        continue;
      }
      return t;
    }
  }

  /** POSIX: when both day fields are restricted, either may match; else the restricted one decides. */
  private dayMatches(year: number, month: number, day: number): boolean {
    const { dom, dow } = this;
    if (dom.unrestricted && dow.unrestricted) return true;
    if (dom.unrestricted) return dayOfWeekMatches(dow, year, month, day);
    if (dow.unrestricted) return dayOfMonthMatches(dom, year, month, day);
    return dayOfMonthMatches(dom, year, month, day) || dayOfWeekMatches(dow, year, month, day);
  }
}

/**
 * The latest occurrence in (`since`, `until`], or undefined: what a schedule fires once to catch
 * up after a pause (OJS cron 7.3: at most one catch-up). Searched back from `until` in growing
 * windows, so a long pause costs a few lookups, not one per missed occurrence.
 */
export function latestBetween(rule: CronRule, since: number, until: number, clock: ZoneClock, anchor: number): number | undefined {
  if (until <= since) return undefined;
  for (let window = 60_000; ; window *= 4) {
    const from = Math.max(since, until - window);
    let found = rule.next(from, clock, anchor);
    if (found !== undefined && found <= until) {
      for (let later = rule.next(found, clock, anchor); later !== undefined && later <= until; later = rule.next(later, clock, anchor)) {
        found = later;
      }
      return found;
    }
    if (from === since) return undefined;
  }
}
