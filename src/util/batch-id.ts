import { StagecoachError } from '../errors/errors.js';

/**
 * A batch id (docs/batches.md): letters, digits, `_`, `-`, `.` and `:`, starting with a letter or
 * digit, at most 128 characters. A caller's own scan id, or a UUID. No spaces or slashes, so it is
 * safe in a log line, a header, a routing key and a URL path. Tested on every batched delivery:
 * a plain anchored expression without backtracking.
 */
export const BATCH_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

export const BATCH_ID_RULE = `${BATCH_ID.source}: letters, digits, "_", "-", "." and ":", at most 128 characters`;

export function isBatchId(value: unknown): value is string {
  return typeof value === 'string' && BATCH_ID.test(value);
}

/**
 * @param where what carried it (`--batch`, `batch`): the message starts with it.
 * @throws StagecoachError `INVALID_REQUEST` (exit code 2 on the command line).
 */
export function checkBatchId(value: unknown, where: string): string {
  if (isBatchId(value)) return value;
  throw new StagecoachError('INVALID_REQUEST', `${where}: ${JSON.stringify(value)?.slice(0, 140)} is not a batch id (${BATCH_ID_RULE})`);
}
