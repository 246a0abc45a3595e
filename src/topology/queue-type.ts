import type { CompiledConfig, QueueType } from '../config/config.types.js';

/**
 * Queue types on the broker: what a queue of each type is declared with.
 *
 * A classic queue is declared without `x-queue-type` (the broker's default), exactly as before
 * queue types existed, so that a broker provisioned by an older stagecoach sees no difference
 * and `plan` asks for no recreation.
 */
export function queueTypeArguments(type: QueueType): Record<string, string> {
  return type === 'quorum' ? { 'x-queue-type': 'quorum' } : {};
}

/**
 * The type of the queues every logical queue shares: the delay ladder (`<prefix>.delay.<k>`) and
 * the unroutable queue. Quorum as soon as one queue is (its own or the `_default` that implicit
 * queues get): a retry of a job on a replicated queue travels through the ladder, and a ladder
 * queue held by one node would lose it with that node (a classic queue whose node is down
 * takes no dead letters: the broker drops them). Classic otherwise, so that a single broker keeps
 * its cheaper ladder.
 */
export function sharedQueueType(config: CompiledConfig): QueueType {
  if (config.defaultQueue.type === 'quorum') return 'quorum';
  for (const queue of config.queues.values()) if (queue.type === 'quorum') return 'quorum';
  return 'classic';
}

/**
 * The arguments of a delay-ladder queue of this type. On quorum queues the broker's own
 * dead-lettering (a level's TTL expiry hands the message to the next level) is at-most-once by
 * default: a message expiring while the next level's leader is being elected after a node
 * failure would be dropped. `at-least-once` keeps it in the level until the next one confirms;
 * RabbitMQ takes that strategy only with `overflow` = `reject-publish` (a ladder queue is never
 * bounded, so it never rejects).
 */
export function ladderTypeArguments(type: QueueType): Record<string, string> {
  if (type !== 'quorum') return {};
  return { ...queueTypeArguments(type), 'x-dead-letter-strategy': 'at-least-once', 'x-overflow': 'reject-publish' };
}
