import { createHash } from 'node:crypto';

/**
 * A name-based UUID, version 5 (RFC 9562 section 5.5: SHA-1 of a namespace UUID and a name).
 * The same namespace and name always give the same id: what makes a job id reproducible, so
 * that a job published again after a crash (a batch callback, see batch/batch-callbacks.ts)
 * carries the id of its first publication and consumers can drop the repeat.
 */
export function uuidv5(name: string, namespace: string): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  if (ns.length !== 16) throw new TypeError(`uuidv5: the namespace must be a UUID, got "${namespace}"`);
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x50; // version 5
  bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
