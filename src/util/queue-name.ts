/**
 * A queue name as a job names it (the OJS binding's push and fetch, `Publisher`): lowercase
 * letters, digits, `_` and `-`, not starting with a separator, at most 100 characters. It becomes
 * part of broker names (`<prefix>.queue.<queue>.<tenant>`), so no dots, slashes or spaces.
 */
export const JOB_QUEUE_NAME = /^[a-z0-9][a-z0-9_-]{0,99}$/;

export function isJobQueueName(name: unknown): name is string {
  return typeof name === 'string' && JOB_QUEUE_NAME.test(name);
}
