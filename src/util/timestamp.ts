import formats from 'ajv-formats';

/**
 * RFC 3339 `date-time`, the ISO 8601 profile OJS timestamps use: calendar-checked, and with a
 * time zone, since a time without one is no single instant to schedule at.
 */
// `.default`: a CommonJS module seen from ESM; ajv-formats exports itself as its own default.
const DATE_TIME = formats.default.get('date-time', 'full') as { validate: (text: string) => boolean };

/** Whether `value` is an RFC 3339 timestamp that `Date.parse` reads as an instant. */
export function isTimestamp(value: unknown): value is string {
  return typeof value === 'string' && DATE_TIME.validate(value) && Number.isFinite(Date.parse(value));
}
