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
  const { text, problem } = resultText(value);
  if (problem !== undefined) return { problem };
  return text === undefined ? {} : { result: value };
}

/** What a stage logs, with the job and the problem, when it leaves a result out. */
export const UNRECORDABLE_RESULT = 'the handler returned a result the job store cannot record; the job completes without it';

/**
 * The result of a handler run in a worker thread, as it crosses to the main thread: JSON text,
 * because a structured clone refuses what JSON drops (a function in an object) and would fail a
 * job that did its work.
 */
export function resultText(value: unknown): { text?: string; problem?: string } {
  if (value === undefined) return {};
  try {
    const text = JSON.stringify(value);
    return text === undefined ? { problem: `a ${typeof value} is not a JSON value` } : { text };
  } catch (err) {
    return { problem: (err as Error).message };
  }
}
