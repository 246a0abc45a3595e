/**
 * A handler's return value as the job store records it (spec/ojs-results.md: a JSON value).
 *
 * Why this is checked apart from the report that carries it: the completed reports of one
 * event-loop turn go to the tracking stream in one message (BatchReports), so a value JSON cannot
 * write (a BigInt, a cycle) would fail that message and with it the settlements of every job in
 * it. The job itself did its work: its result is left out of the record, with `problem` saying
 * why, and it completes.
 */
export type RecordableResult = { result?: unknown; problem?: undefined } | { result?: undefined; problem: string };

export function recordableResult(value: unknown): RecordableResult {
  if (value === undefined) return {};
  try {
    return JSON.stringify(value) === undefined ? { problem: notJson(value) } : { result: value };
  } catch (err) {
    return { problem: (err as Error).message };
  }
}

/**
 * The result of a handler run in a worker thread, as it crosses to the main thread: JSON text,
 * because a structured clone refuses what JSON drops (a function in an object) and would fail a
 * job that did its work.
 */
export function resultText(value: unknown): { text?: string; problem?: string } {
  if (value === undefined) return {};
  try {
    const text = JSON.stringify(value);
    return text === undefined ? { problem: notJson(value) } : { text };
  } catch (err) {
    return { problem: (err as Error).message };
  }
}

function notJson(value: unknown): string {
  return `a ${typeof value} is not a JSON value`;
}
