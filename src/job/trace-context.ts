import { randomFillSync } from 'node:crypto';

/** W3C Trace Context `traceparent`: version-traceid-parentid-flags. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A traceparent for a new job: the parent's trace continues with a new span id. */
export function childTraceparent(parent?: string): string {
  const match = parent === undefined ? null : TRACEPARENT.exec(parent);
  const traceId = match?.[1] ?? randomHex(16);
  const flags = match?.[3] ?? '01';
  return `00-${traceId}-${randomHex(8)}-${flags}`;
}

/** Random bytes drawn from a pool refilled 4 KiB at a time: one emit need not cost a syscall. */
const pool = Buffer.alloc(4096);
let offset = pool.length;

function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const hex = pool.toString('hex', offset, offset + bytes);
  offset += bytes;
  return hex;
}

export function isTraceparent(value: unknown): value is string {
  return typeof value === 'string' && TRACEPARENT.test(value);
}

/** The trace id of a traceparent header, for log lines; undefined when there is none. */
export function traceIdOf(traceparent: unknown): string | undefined {
  return typeof traceparent === 'string' ? TRACEPARENT.exec(traceparent)?.[1] : undefined;
}
