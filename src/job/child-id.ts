import { createHash } from 'node:crypto';

/** A UUID in its usual lowercase 8-4-4-4-12 form, of any version. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The id of the job a parent job's run pushes under `key` (docs/http-binding.md, "A foreign worker
 * inside a pipeline"): derived, never drawn, so a run that crashed after pushing and is run again
 * pushes the same ids, and the second push of each is recognised. Shaped as a UUIDv7 (RFC 9562
 * 5.7) whose time is the parent's (zero for a parent whose id is no UUIDv7), so the job store lists
 * the children beside their parent and OJS tools that check ids take it; the other 74 bits come
 * from a SHA-256 of the tenant, the parent and the key.
 */
export function childJobId(parentId: string, key: string, tenant: string | undefined): string {
  const hash = createHash('sha256')
    .update(`${tenant ?? ''}\u0000${parentId}\u0000${key}`)
    .digest();
  const bytes = Buffer.alloc(16);
  const parentTime = UUID.test(parentId) && parentId[14] === '7' ? parentId.replace(/-/g, '').slice(0, 12) : undefined;
  if (parentTime !== undefined) bytes.write(parentTime, 0, 6, 'hex');
  hash.copy(bytes, 6, 0, 10);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x70; // version 7
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
