import { StagecoachError } from '../errors/errors.js';

/** Wall-clock fields of an instant in a time zone (month 1-12, weekday 0 = Sunday). */
export interface WallFields {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

/** A quarter of an hour: every offset in force since 1970 is a multiple of it, and so is every transition instant. */
const QUARTER_MS = 15 * 60_000;
/** Offsets remembered per zone, by quarter hour (a few days of lookups around each occurrence). */
const OFFSETS_KEPT = 4096;

/**
 * Checks an IANA time zone name as OJS cron section 5.1 wants it: a name of the tz database
 * (`Europe/Copenhagen`, `America/New_York`) or `UTC`, never a fixed offset (`+05:00`, `UTC+5`,
 * `Etc/GMT+5`) nor an abbreviation (`EST`, `CET`): those do not follow daylight saving time.
 * @returns the name as given.
 * @throws StagecoachError INVALID_REQUEST saying what is wrong.
 */
export function checkTimeZone(name: string, where = 'timezone'): string {
  const expected = `an IANA time zone name such as "Europe/Copenhagen" or "UTC"`;
  if (name === 'UTC' || name === 'Etc/UTC') return name;
  if (/^[+-]|^(UTC|GMT)[+-]|^Etc\/GMT[+-]/i.test(name)) {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `${where}: "${name}" is a fixed UTC offset, which ignores daylight saving time: use ${expected}`,
    );
  }
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9][A-Za-z0-9_+-]*)+$/.test(name)) {
    throw new StagecoachError('INVALID_REQUEST', `${where}: "${name}" is not an IANA time zone name (Area/Location): use ${expected}`);
  }
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
  } catch {
    throw new StagecoachError('INVALID_REQUEST', `${where}: "${name}" is not a time zone this runtime knows: use ${expected}`);
  }
  return name;
}

/**
 * One time zone's clock, through `Intl` (the runtime's tz database): the wall-clock time of an
 * instant, and the instants a wall-clock time names. Wall-clock times are handled as "naive"
 * milliseconds (the fields read as if they were UTC), so calendar arithmetic is `Date.UTC`'s.
 */
export class ZoneClock {
  private readonly format: Intl.DateTimeFormat | undefined;
  private readonly offsets = new Map<number, number>();

  constructor(readonly zone: string) {
    this.format =
      zone === 'UTC' || zone === 'Etc/UTC'
        ? undefined
        : new Intl.DateTimeFormat('en-US', {
            timeZone: zone,
            hourCycle: 'h23',
            year: 'numeric',
            month: 'numeric',
            day: 'numeric',
            hour: 'numeric',
            minute: 'numeric',
            second: 'numeric',
          });
  }

  /** The offset from UTC in force at `instant`, in ms (local = UTC + offset). */
  offsetAt(instant: number): number {
    if (this.format === undefined) return 0;
    const quarter = Math.floor(instant / QUARTER_MS);
    let offset = this.offsets.get(quarter);
    if (offset === undefined) {
      const start = quarter * QUARTER_MS;
      offset = naiveOf(this.fieldsOf(start)) - start;
      if (this.offsets.size >= OFFSETS_KEPT) this.offsets.clear();
      this.offsets.set(quarter, offset);
    }
    return offset;
  }

  /** The wall-clock time of `instant`, as naive ms (whole seconds kept). */
  wallOf(instant: number): number {
    return instant + this.offsetAt(instant);
  }

  /**
   * The instants whose wall-clock time is `wall` (naive ms), earliest first: none in a
   * spring-forward gap, two in a fall-back hour, else one.
   */
  instantsOf(wall: number): number[] {
    // The offsets in force a day either side: a wall time maps to one of them (zones change
    // offset at most once in two days).
    const found: number[] = [];
    for (const offset of new Set([this.offsetAt(wall - 86_400_000), this.offsetAt(wall + 86_400_000)])) {
      const instant = wall - offset;
      if (this.wallOf(instant) === wall && !found.includes(instant)) found.push(instant);
    }
    return found.sort((a, b) => a - b);
  }

  private fieldsOf(instant: number): WallFields {
    const fields: WallFields = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
    for (const part of (this.format as Intl.DateTimeFormat).formatToParts(instant)) {
      if (part.type in fields) fields[part.type as keyof WallFields] = Number(part.value);
    }
    return fields;
  }
}

/** Naive ms of wall-clock fields. */
export function naiveOf(fields: WallFields): number {
  return Date.UTC(fields.year, fields.month - 1, fields.day, fields.hour, fields.minute, fields.second);
}

/** One clock per zone for the process: a clock keeps its offsets. */
const clocks = new Map<string, ZoneClock>();

export function clockOf(zone: string): ZoneClock {
  let clock = clocks.get(zone);
  if (clock === undefined) {
    clock = new ZoneClock(zone);
    clocks.set(zone, clock);
  }
  return clock;
}
