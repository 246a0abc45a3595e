import type { CompiledConfig } from '../config/config.types.js';
import { queueFor, settingsFor, variantOf } from '../config/queue-resolver.js';
import { QueueUnavailableError, type QueueFullError } from '../errors/errors.js';
import { DELAY_LEVELS } from '../topology/delay-topology.js';
import { brokerNamesOf } from '../topology/names.js';

/** Reads a queue's ready messages, or undefined when the broker could not answer (PublishChannel.readyMessages). */
export type ReadyMessages = (queue: string) => Promise<number | undefined>;

/**
 * Why the broker nacked a publish. RabbitMQ nacks for two reasons only: a queue at its
 * `max-length` with `reject-publish` (stagecoach's `max_size` with `overflow_policy` `reject` or
 * `block`), and a quorum queue that has no leader, for the seconds a cluster takes to elect one
 * after a node is lost. The confirm says neither: ConfirmPublisher takes every nack for the
 * first, which is final (the job's attempt is spent, or its producer told QUEUE_FULL). Taken for
 * fullness, a failover spent every attempt of the jobs whose emits it refused and dead-lettered
 * them (cluster.test.ts). So a quorum queue's refusal is checked before it is believed (a
 * classic queue has no leader: its refusal stands):
 * - a queue that cannot refuse for room (no `max_size`, or `drop_oldest`; the delay ladder's
 *   `due` queues and the dead-letter queues) refused for want of a leader;
 * - a bounded queue is read (a passive declare on another channel): below its `max_size`, it
 *   was not full; when it cannot be read, it has no leader either;
 * - a queue bounded in bytes (`max_size_bytes`) cannot be read in bytes over AMQP, nor a refusal
 *   whose queue the route does not name: they stay QUEUE_FULL, as before.
 * Only refusals pay for the check; a publisher whose channel cannot read queues keeps them all.
 * The bound is this process's configuration: a quorum queue's `max_size` lowered by `apply`
 * below what a running process was started with takes its refusals for a missing leader until
 * the process restarts. Its jobs are then handed back (a second apart, no attempt spent), never
 * lost, where they would have been refused.
 * @returns the refusal as a transient {@link QueueUnavailableError}, or undefined when it stands.
 */
export async function unavailableQueue(
  config: CompiledConfig,
  refusal: QueueFullError,
  readyMessages: ReadyMessages | undefined,
): Promise<QueueUnavailableError | undefined> {
  const judged = judgeByConfig(config, refusal);
  if (judged === undefined) return undefined;
  const { queue, maxSize } = judged;
  const unavailable = (notFull: string): QueueUnavailableError =>
    new QueueUnavailableError(refusal.exchange, refusal.routingKey, queue, notFull, refusal.tenant);
  if (judged.notFull !== undefined) return unavailable(judged.notFull);
  if (maxSize === undefined || readyMessages === undefined) return undefined;
  const ready = await readyMessages(queue);
  if (ready === undefined) return unavailable('its depth could not be read');
  return ready < maxSize ? unavailable(`it holds ${ready} of its max_size ${maxSize} ready messages`) : undefined;
}

/**
 * Whether a refusal is known, by the configuration alone, not to be for room: a quorum queue (or
 * its `due` or dead-letter queue) that never refuses for room. What QueueFullReporter leaves out
 * of `queue.full` and the capacity metrics, with no broker call.
 */
export function refusedWithoutBound(config: CompiledConfig, refusal: QueueFullError): boolean {
  return judgeByConfig(config, refusal)?.notFull !== undefined;
}

/**
 * The refused physical queue of a quorum queue and what its configuration says: `notFull` when it
 * never refuses for room, else its `max_size` to read it against (none: bounded in bytes, not
 * readable). Undefined when the refusal stands unread: a classic queue, a route naming no queue.
 */
function judgeByConfig(config: CompiledConfig, refusal: QueueFullError): { queue: string; notFull?: string; maxSize?: number } | undefined {
  const names = brokerNamesOf(config);
  if (refusal.queue === undefined) return undefined;
  try {
    const queue = refusedQueue(config, refusal);
    if (queue === undefined) return undefined;
    const logical = queueFor(config, refusal.queue);
    // Only a quorum queue has a leader to lose (its companions take its type): a classic
    // queue's refusal is for room, as it always was.
    if (logical.type !== 'quorum') return undefined;
    if (refusal.exchange === names.retry || refusal.exchange === names.dlx)
      return { queue, notFull: 'a due or dead-letter queue has no max_size' };
    // A shared queue's settings are the queue's: tenants may not change them (compile-config.ts).
    const settings = settingsFor(config, refusal.queue, logical.scope === 'shared' ? undefined : refusal.tenant);
    if (settings.overflow_policy === 'drop_oldest') return { queue, notFull: 'overflow_policy drop_oldest never refuses for room' };
    if (settings.max_size_bytes !== undefined) return { queue };
    if (settings.max_size === undefined) return { queue, notFull: 'it has no max_size' };
    return { queue, maxSize: settings.max_size };
  } catch {
    // A queue the configuration refuses to name (strict_queues): its refusal stands.
    return undefined;
  }
}

/**
 * The physical queue that refused a job (a {@link QueueFullError}), read back from where it was
 * published as {@link routeFor} and the settlement address it: the shared queue, the tenant's
 * variant or general queue (the broker picks it by the same headers), the queue a delay-ladder
 * key or a dead-letter key names. Undefined when the route names no queue of this prefix.
 */
export function refusedQueue(config: CompiledConfig, refusal: QueueFullError): string | undefined {
  const names = brokerNamesOf(config);
  const { exchange, routingKey } = refusal;
  if (exchange === names.dlx || exchange === '') return routingKey;
  if (exchange === names.retry) return routingKey.split('.').slice(DELAY_LEVELS).join('.');
  if (exchange === names.direct) return names.queue(routingKey);
  const tenant = refusal.tenant;
  if (tenant === undefined || (exchange !== names.root && exchange !== names.tenantExchange(tenant))) return undefined;
  return names.queue(routingKey, tenant, variantOf(queueFor(config, routingKey), refusal.headers));
}
