import { StagecoachError } from '../errors/errors.js';

/** One field of a calendar expression: its name, its range, the names it takes (OJS cron 3.1, 3.4). */
interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
}

export const SECOND: FieldSpec = { name: 'second', min: 0, max: 59 };
export const MINUTE: FieldSpec = { name: 'minute', min: 0, max: 59 };
export const HOUR: FieldSpec = { name: 'hour', min: 0, max: 23 };
export const DAY_OF_MONTH: FieldSpec = { name: 'day of month', min: 1, max: 31 };
export const MONTH: FieldSpec = {
  name: 'month',
  min: 1,
  max: 12,
  names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'],
};
/** 0-7, Sunday being both 0 and 7. */
export const DAY_OF_WEEK: FieldSpec = { name: 'day of week', min: 0, max: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] };

/** The values of a field, as a bit set (index = value). */
export type ValueSet = readonly boolean[];

/** A day-of-month field: plain days, and Quartz's `L`, `L-n`, `LW`, `nW` (OJS cron 3.3). */
export interface DayOfMonthField {
  days: ValueSet;
  /** Days before the month's last: `L` is 0, `L-3` is 3. */
  fromLast: number[];
  /** `LW`: the last weekday of the month. */
  lastWeekday: boolean;
  /** `15W`: the weekday nearest the 15th, within the month. */
  nearestWeekday: number[];
  /** Written as `*` or `?` (alone, or with a step): matches whatever the day of week says. */
  unrestricted: boolean;
}

/** A day-of-week field: plain weekdays (0 = Sunday), `5L` (last Friday), `5#3` (third Friday). */
export interface DayOfWeekField {
  days: ValueSet;
  last: number[];
  nth: Array<{ weekday: number; n: number }>;
  unrestricted: boolean;
}

function invalid(expression: string, reason: string): StagecoachError {
  return new StagecoachError('INVALID_REQUEST', `cron expression "${expression}": ${reason}`);
}

/** A number or a name of the field, checked against its range. */
function valueOf(text: string, spec: FieldSpec, expression: string): number {
  const upper = text.toUpperCase();
  const named = spec.names?.indexOf(upper) ?? -1;
  if (named >= 0) return named + (spec === MONTH ? 1 : 0);
  if (!/^\d+$/.test(text)) throw invalid(expression, `${spec.name} field: "${text}" is not a number${spec.names ? ' or a name' : ''}`);
  const value = Number(text);
  if (value < spec.min || value > spec.max) {
    throw invalid(expression, `${spec.name} field: ${value} is out of range (${spec.min}-${spec.max})`);
  }
  return value;
}

/**
 * Reads a plain field (`*`, `a`, `a-b`, any of them with `/step`, lists of them with `,`) into
 * its value set. Day of week 7 is folded onto 0.
 */
export function parseValues(text: string, spec: FieldSpec, expression: string): boolean[] {
  const set = new Array<boolean>(spec.max + 1).fill(false);
  for (const item of text.split(',')) {
    if (item === '') throw invalid(expression, `${spec.name} field: an empty list item in "${text}"`);
    const [range, stepText, extra] = item.split('/');
    if (extra !== undefined) throw invalid(expression, `${spec.name} field: "${item}" has more than one "/"`);
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d+$/.test(stepText)) throw invalid(expression, `${spec.name} field: step "${stepText}" is not a whole number`);
      step = Number(stepText);
      if (step === 0) throw invalid(expression, `${spec.name} field: a step of 0 never advances`);
    }
    let from: number;
    let to: number;
    if (range === '*' || range === '?') {
      from = spec.min;
      to = spec === DAY_OF_WEEK ? 6 : spec.max;
    } else if (range.includes('-')) {
      const [a, b, more] = range.split('-');
      if (more !== undefined || a === '' || b === '') throw invalid(expression, `${spec.name} field: "${range}" is not a range`);
      from = valueOf(a, spec, expression);
      to = valueOf(b, spec, expression);
      if (from > to) throw invalid(expression, `${spec.name} field: range "${range}" starts after it ends`);
    } else {
      from = valueOf(range, spec, expression);
      // `a/step`: from a to the end of the range.
      to = stepText === undefined ? from : spec.max;
    }
    for (let value = from; value <= to; value += step) set[spec === DAY_OF_WEEK && value === 7 ? 0 : value] = true;
  }
  return set;
}

const unrestricted = (text: string): boolean => text.startsWith('*') || text.startsWith('?');

export function parseDayOfMonth(text: string, expression: string): DayOfMonthField {
  const field: DayOfMonthField = { days: [], fromLast: [], lastWeekday: false, nearestWeekday: [], unrestricted: unrestricted(text) };
  const plain: string[] = [];
  for (const item of text.split(',')) {
    const upper = item.toUpperCase();
    if (upper === 'L') field.fromLast.push(0);
    else if (/^L-\d+$/.test(upper)) {
      const back = Number(upper.slice(2));
      if (back > 30) throw invalid(expression, `day of month field: "${item}" reaches before the first of the month`);
      field.fromLast.push(back);
    } else if (upper === 'LW') field.lastWeekday = true;
    else if (/^\d+W$/.test(upper)) field.nearestWeekday.push(valueOf(upper.slice(0, -1), DAY_OF_MONTH, expression));
    else if (/[LW]/i.test(item)) throw invalid(expression, `day of month field: "${item}" (L and W take the forms L, L-3, LW, 15W)`);
    else plain.push(item);
  }
  field.days = plain.length === 0 ? new Array<boolean>(32).fill(false) : parseValues(plain.join(','), DAY_OF_MONTH, expression);
  return field;
}

export function parseDayOfWeek(text: string, expression: string): DayOfWeekField {
  const field: DayOfWeekField = { days: [], last: [], nth: [], unrestricted: unrestricted(text) };
  const plain: string[] = [];
  for (const item of text.split(',')) {
    const upper = item.toUpperCase();
    const nth = /^(\w+)#(\d+)$/.exec(upper);
    if (nth !== null) {
      const n = Number(nth[2]);
      if (n < 1 || n > 5) throw invalid(expression, `day of week field: "${item}": the occurrence after # is 1 to 5`);
      field.nth.push({ weekday: valueOf(nth[1] as string, DAY_OF_WEEK, expression) % 7, n });
    } else if (/^\w+L$/.test(upper) && upper !== 'L') {
      field.last.push(valueOf(upper.slice(0, -1), DAY_OF_WEEK, expression) % 7);
    } else if (upper === 'L') field.last.push(6);
    else if (item.includes('#')) throw invalid(expression, `day of week field: "${item}" (# takes the form 5#3: third Friday)`);
    else plain.push(item);
  }
  field.days = plain.length === 0 ? new Array<boolean>(8).fill(false) : parseValues(plain.join(','), DAY_OF_WEEK, expression);
  return field;
}

/** Days in a month (month 1-12). */
export function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** 0 = Sunday. */
function weekdayOf(year: number, month: number, day: number): number {
  return new Date(Date.UTC(year, month - 1, day)).getUTCDay();
}

/** The weekday (Monday-Friday) nearest `day`, never leaving the month (Quartz's `W`). */
function nearestWeekday(year: number, month: number, day: number): number | undefined {
  const last = daysIn(year, month);
  if (day > last) return undefined;
  const weekday = weekdayOf(year, month, day);
  if (weekday === 6) return day === 1 ? 3 : day - 1;
  if (weekday === 0) return day === last ? day - 2 : day + 1;
  return day;
}

export function dayOfMonthMatches(field: DayOfMonthField, year: number, month: number, day: number): boolean {
  if (field.days[day] === true) return true;
  const last = daysIn(year, month);
  if (field.fromLast.some((back) => day === last - back)) return true;
  if (field.lastWeekday && day === nearestWeekday(year, month, last)) return true;
  return field.nearestWeekday.some((wanted) => nearestWeekday(year, month, wanted) === day);
}

export function dayOfWeekMatches(field: DayOfWeekField, year: number, month: number, day: number): boolean {
  const weekday = weekdayOf(year, month, day);
  if (field.days[weekday] === true) return true;
  if (field.last.includes(weekday) && day + 7 > daysIn(year, month)) return true;
  return field.nth.some((nth) => nth.weekday === weekday && Math.ceil(day / 7) === nth.n);
}
