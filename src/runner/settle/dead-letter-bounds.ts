import { OJS_HEADERS } from '../../job/amqp-mapping.js';
import type { HeaderValue, JobError } from '../../job/job.types.js';
import { headerEntryBytes, MAX_INCOMING_HEADER_BYTES } from '../../job/wire-limits.js';

/*
 * What a dead letter copies is bounded: a dead letter must always be publishable, and it must
 * always carry its reason. Without bounds, a handler's error with a 100 KiB message, a stack of
 * thousands of frames, or a job revived by `dead retry` many times (its `meta.errors` growing by
 * one entry each time) makes the dead letter's headers outgrow what amqplib can encode (64 KiB):
 * the publish fails in the client, and the delivery is rejected to the broker's route without
 * `x-ojs-error-*`.
 */

/** An error message, in bytes: the body's `error.message` and the `x-ojs-error-message` header. */
export const MAX_ERROR_MESSAGE_BYTES = 1024;
/** An error type, in bytes (it travels in `x-ojs-error-type`). */
export const MAX_ERROR_TYPE_BYTES = 200;
/** Lines of a backtrace kept (the innermost), and bytes of each line. */
export const MAX_BACKTRACE_LINES = 50;
export const MAX_BACKTRACE_LINE_BYTES = 300;
/** Entries of `meta.errors` (the history `dead retry` keeps) kept: the latest. */
export const MAX_ERROR_HISTORY = 20;
/** The names listed in `x-ojs-dropped-headers`, in bytes. */
const MAX_DROPPED_LIST_BYTES = 1024;

/** `text` cut to at most `maxBytes` of UTF-8 (and a note of what was cut). */
export function clip(text: string, maxBytes: number): string {
  if (text.length <= maxBytes / 4 || Buffer.byteLength(text) <= maxBytes) return text;
  const note = ` [${Buffer.byteLength(text)} bytes, cut]`;
  // A multi-byte character cut in two decodes as U+FFFD: the text stays valid UTF-8.
  return (
    Buffer.from(text)
      .subarray(0, maxBytes - note.length - 3)
      .toString('utf8') + note
  );
}

/** The error a dead letter carries: its type, message and backtrace bounded. */
export function boundedError(error: JobError): JobError {
  const bounded: JobError = { type: clip(error.type, MAX_ERROR_TYPE_BYTES), message: clip(error.message, MAX_ERROR_MESSAGE_BYTES) };
  if (error.backtrace !== undefined) {
    bounded.backtrace = error.backtrace.slice(0, MAX_BACKTRACE_LINES).map((line) => clip(String(line), MAX_BACKTRACE_LINE_BYTES));
  }
  return bounded;
}

/** A job's meta as a dead letter carries it: the error history and the last error bounded. */
export function boundedMeta(meta: Record<string, unknown>): Record<string, unknown> {
  const { errors, last_error: last } = meta;
  if (!Array.isArray(errors) && !isError(last)) return meta;
  const bounded = { ...meta };
  if (Array.isArray(errors))
    bounded.errors = errors.slice(-MAX_ERROR_HISTORY).map((entry) => (isError(entry) ? { ...entry, ...boundedError(entry) } : entry));
  if (isError(last)) bounded.last_error = { ...last, ...boundedError(last) };
  return bounded;
}

/**
 * The delivery's headers a dead letter can copy: all of them when they fit in
 * MAX_INCOMING_HEADER_BYTES (always, for a delivery that passed admission), else without the
 * largest until they do, their names listed in `x-ojs-dropped-headers`. The headers a dead
 * letter adds (error, origin, stage, time) fit in the room left.
 */
export function fittedHeaders(headers: Record<string, HeaderValue>): Record<string, HeaderValue> {
  const sizes = Object.entries(headers).map(([name, value]) => ({ name, bytes: headerEntryBytes(name, value) }));
  let total = 4 + sizes.reduce((sum, entry) => sum + entry.bytes, 0);
  if (total <= MAX_INCOMING_HEADER_BYTES - MAX_DROPPED_LIST_BYTES) return headers;
  const fitted = { ...headers };
  const dropped: string[] = [];
  for (const { name, bytes } of sizes.sort((a, b) => b.bytes - a.bytes)) {
    if (total <= MAX_INCOMING_HEADER_BYTES - MAX_DROPPED_LIST_BYTES) break;
    delete fitted[name];
    dropped.push(name);
    total -= bytes;
  }
  fitted[OJS_HEADERS.droppedHeaders] = clip(dropped.join(','), MAX_DROPPED_LIST_BYTES - 64);
  return fitted;
}

function isError(value: unknown): value is JobError {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as JobError).message === 'string' &&
    typeof (value as JobError).type === 'string'
  );
}
