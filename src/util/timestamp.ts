/**
 * RFC 3339 `date-time`, the ISO 8601 profile OJS timestamps use: with a time zone, since a time
 * without one is no single instant to schedule at. One regular expression and a calendar check:
 * this runs on every delivery (`created_at`), so it stays cheap.
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
/** Where `YYYY-MM-DDTHH:MM:SS.sssZ` has digits. */
const DIGITS_AT = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22];

/**
 * Whether `value` is an RFC 3339 timestamp of a real calendar day that `Date.parse` reads as an
 * instant (which also checks the hours, minutes, seconds and offset ranges).
 */
export function isTimestamp(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  if (value.length === 24 && isUtcMillis(value)) return true;
  const match = RFC3339.exec(value);
  if (match === null) return false;
  const year = Number(match[1]);
  const month = Number(match[2]);
  const day = Number(match[3]);
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > (month === 2 && leap ? 29 : DAYS[month - 1])) return false;
  // Date.parse takes 24:00 as the next midnight; RFC 3339 has no hour 24.
  if (Number(match[4]) > 23 || Number(match[5]) > 59 || Number(match[6]) > 59) return false;
  return Number.isFinite(Date.parse(value));
}

/**
 * The form `Date.prototype.toISOString()` writes, `2026-11-22T06:00:00.000Z`, which nearly every
 * job carries: checked character by character, without a regular expression or `Date.parse`.
 */
function isUtcMillis(text: string): boolean {
  for (const at of DIGITS_AT) {
    const digit = text.charCodeAt(at) - 48;
    if (digit < 0 || digit > 9) return false;
  }
  if (
    text[4] !== '-' ||
    text[7] !== '-' ||
    text[10] !== 'T' ||
    text[13] !== ':' ||
    text[16] !== ':' ||
    text[19] !== '.' ||
    text[23] !== 'Z'
  ) {
    return false;
  }
  const year = Number(text.slice(0, 4));
  const month = twoDigits(text, 5);
  const day = twoDigits(text, 8);
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > (month === 2 && leap ? 29 : DAYS[month - 1])) return false;
  return twoDigits(text, 11) <= 23 && twoDigits(text, 14) <= 59 && twoDigits(text, 17) <= 59;
}

function twoDigits(text: string, at: number): number {
  return (text.charCodeAt(at) - 48) * 10 + text.charCodeAt(at + 1) - 48;
}

let lastMs = Number.NaN;
let lastIso = '';

/**
 * `new Date().toISOString()`, formatted once per millisecond: settlement reports take their time
 * on the hot path, many in the same millisecond, and formatting is most of what that costs.
 */
export function isoNow(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}
