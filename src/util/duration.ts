/** ISO 8601 durations as OJS uses them (`PT1S`, `PT5M`, `P1D`): days, hours, minutes, seconds. */
const DURATION = /^P(?!$)(?:(\d+(?:\.\d+)?)D)?(?:T(?=\d)(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/** Milliseconds in an ISO 8601 duration, or `undefined` when it is not one. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (!match) return undefined;
  const [, d, h, m, s] = match.map((part) => (part === undefined ? 0 : Number(part)));
  return Math.round((((d * 24 + h) * 60 + m) * 60 + s) * 1000);
}
