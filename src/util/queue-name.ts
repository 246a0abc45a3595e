import { StagecoachError } from '../errors/errors.js';

/**
 * A logical queue name, the one rule for every place a queue is named: the configuration (and
 * its shipped JSON Schema, `queues` property names), `@Stage` inputs and outputs, `Publisher`,
 * the OJS binding's push and fetch, the admin API's paths and the command line. ojs-core 5.1's
 * rule (`[a-z0-9][a-z0-9\-\.]*`, at most 255 characters), which every official OJS SDK checks
 * before it sends a name, plus `_`. A unit test keeps the schema's pattern equal to it.
 *
 * Tested per push and fetch: a plain, precompiled, anchored expression without backtracking.
 */
export const QUEUE_NAME = /^[a-z0-9][a-z0-9_.-]{0,254}$/;

/** The rule in words, for messages. */
export const QUEUE_NAME_RULE = 'lowercase letters, digits, "-", "." and "_", starting with a letter or a digit, at most 255 characters';

export function isQueueName(value: unknown): value is string {
  return typeof value === 'string' && QUEUE_NAME.test(value);
}

/**
 * Returns `value` when it is a queue name.
 * @param where what carried it (`--queue`, `queues.conversions`...): the message starts with it.
 * @throws StagecoachError `INVALID_REQUEST` naming the value and the rule.
 */
export function checkQueueName(value: unknown, where: string): string {
  if (isQueueName(value)) return value;
  const shown = JSON.stringify(value)?.slice(0, 120) ?? typeof value;
  throw new StagecoachError('INVALID_REQUEST', `${where}: ${shown} is not a queue name (${QUEUE_NAME_RULE})`);
}

/**
 * The queue's word in broker names (docs/broker.md, "Dotted queue names"): each `.` becomes `~`.
 * Broker names join their words with dots (`<prefix>.queue.<queue>.<tenant>[.<variant>]`), and
 * tenants and variants have none, so a queue's own dots would make `a.b` + tenant `c` and `a` +
 * tenant `b` + variant `c` one name. `~` is in no queue name, tenant or variant, so the mapping
 * is one to one and read back by {@link queueOfWord}. A name without dots is its own word: every
 * broker name made before dots were allowed stays as it was.
 */
export function queueWord(queue: string): string {
  return queue.includes('.') ? queue.replaceAll('.', '~') : queue;
}

/** The logical queue of a word of a broker name (the inverse of {@link queueWord}). */
export function queueOfWord(word: string): string {
  return word.includes('~') ? word.replaceAll('~', '.') : word;
}
