/**
 * Danish CPR numbers (DDMMYY-SSSS). Only the date part can be validated: the modulus 11 check
 * was dropped in 2007, so a valid date is what makes ten digits a plausible CPR number.
 */

/**
 * The birth year: the century is given by the first serial digit together with the two-digit
 * year (CPR office table), which matters for 29 February.
 */
export function cprBirthYear(yy: number, firstSerialDigit: number): number {
  if (firstSerialDigit <= 3) return 1900 + yy;
  if (firstSerialDigit === 4 || firstSerialDigit === 9) return (yy <= 36 ? 2000 : 1900) + yy;
  return (yy <= 57 ? 2000 : 1800) + yy;
}

/** True when `text` is DDMMYY-SSSS or DDMMYYSSSS with a date that exists. */
export function isValidCpr(text: string): boolean {
  const match = /^(\d{2})(\d{2})(\d{2})-?(\d)\d{3}$/.exec(text);
  if (!match) return false;
  const [day, month, yy, serial] = match.slice(1).map(Number) as [number, number, number, number];
  const year = cprBirthYear(yy, serial);
  // Date.UTC rolls 30 February over into March: the date exists only if nothing rolled over.
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}
