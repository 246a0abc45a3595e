import { OJS_HEADERS } from '../job/amqp-mapping.js';
import { parsePayloadRef } from './payload-ref.js';
import type { PayloadKey, PayloadStore } from './payload-store.js';

/** What an operator is shown of a job that travels by reference (`dead list`, the dashboard). */
export interface PayloadInfo {
  /** `x-ojs-payload-ref` as the message carries it: `<tenant>/<uuid>`. */
  ref: string;
  /** `x-ojs-payload-size`: bytes of the serialized arguments; null when the header is missing. */
  size: number | null;
  /** Whether the store still has it; false for a reference that is not `<tenant>/<uuid>`. */
  stored: boolean;
}

/** A payload loaded for display: its arguments, when stored, parseable and within the cap. */
export interface LoadedPayloadInfo extends PayloadInfo {
  /** The job's arguments, when the payload is stored and no larger than the cap. */
  args?: unknown[];
  /** True when the payload is larger than the cap: stored, but its arguments are not shown. */
  truncated?: boolean;
  /** Why a stored payload's arguments are not shown (not a JSON array of arguments). */
  error?: string;
}

/** The reference and size a message's headers carry, or undefined for a job with its arguments inline. */
function referenceOf(headers: Readonly<Record<string, unknown>>): { ref: string; size: number | null; key?: PayloadKey } | undefined {
  const value = headers[OJS_HEADERS.payloadRef];
  if (value === undefined) return undefined;
  const ref = Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
  const sizeHeader = headers[OJS_HEADERS.payloadSize];
  const size = typeof sizeHeader === 'number' && Number.isSafeInteger(sizeHeader) && sizeHeader >= 0 ? sizeHeader : null;
  try {
    return { ref, size, key: parsePayloadRef(ref) };
  } catch {
    return { ref, size }; // malformed: shown as it is, never looked up
  }
}

/** Whether `store` has the payload, with `has` where the store offers it, else by reading it. */
async function payloadStored(store: PayloadStore, key: PayloadKey): Promise<boolean> {
  return store.has !== undefined ? store.has(key) : (await store.get(key)) !== undefined;
}

/**
 * The payload reference of a message, its size and whether the store still has it; undefined
 * for a message without `x-ojs-payload-ref`. Never reads the payload itself (see `has`).
 */
export async function payloadInfo(headers: Readonly<Record<string, unknown>>, store: PayloadStore): Promise<PayloadInfo | undefined> {
  const found = referenceOf(headers);
  if (found === undefined) return undefined;
  return { ref: found.ref, size: found.size, stored: found.key !== undefined && (await payloadStored(store, found.key)) };
}

/**
 * As {@link payloadInfo}, with the job's arguments loaded from the store when they take at most
 * `maxBytes`; a larger payload is only looked for (`truncated: true`), never read whole, when
 * its size header says so.
 */
export async function loadPayloadInfo(
  headers: Readonly<Record<string, unknown>>,
  store: PayloadStore,
  maxBytes: number,
): Promise<LoadedPayloadInfo | undefined> {
  const found = referenceOf(headers);
  if (found === undefined) return undefined;
  const { ref, size, key } = found;
  if (key === undefined) return { ref, size, stored: false };
  if (size !== null && size > maxBytes) return { ref, size, stored: await payloadStored(store, key), truncated: true };
  const data = await store.get(key);
  if (data === undefined) return { ref, size, stored: false };
  if (data.length > maxBytes) return { ref, size, stored: true, truncated: true };
  try {
    const args: unknown = JSON.parse(data.toString('utf8'));
    if (Array.isArray(args)) return { ref, size, stored: true, args };
  } catch {
    // reported below
  }
  return { ref, size, stored: true, error: 'the payload is not a JSON array of arguments' };
}
