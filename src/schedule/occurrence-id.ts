import { createHash } from 'node:crypto';

/**
 * The job id of one occurrence of a schedule (for one tenant), derived, never drawn: the same
 * schedule, registration, tenant and occurrence always give the same id, whichever process fires
 * it and however often it tries. Shaped as a UUIDv7 (RFC 9562 5.7) whose time is the occurrence's,
 * so the job store lists occurrences in their order, and OJS tools that check ids take it; the
 * other 74 bits come from a SHA-256 of the rest.
 *
 * @param registration when the schedule was registered (ISO 8601): a schedule removed and
 *   registered again is a new one, whose occurrences are new jobs.
 * @param occurrence epoch ms of the occurrence; for a manual trigger, its record's time with
 *   `salt` the trigger's id.
 */
export function occurrenceId(key: string, registration: string, tenant: string | undefined, occurrence: number, salt = ''): string {
  const hash = createHash('sha256')
    .update(`${key}\u0000${registration}\u0000${tenant ?? ''}\u0000${occurrence}\u0000${salt}`)
    .digest();
  const bytes = Buffer.alloc(16);
  bytes.writeUIntBE(Math.max(0, Math.floor(occurrence)) % 2 ** 48, 0, 6);
  hash.copy(bytes, 6, 0, 10);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x70; // version 7
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The batch an occurrence's job starts when its schedule has `batch: true`: named after the job. */
export function occurrenceBatch(jobId: string): string {
  return `cron:${jobId}`;
}
