import type { AmqpConnection } from '../../broker/amqp-connection.js';
import { QueueDepthCache } from '../../observability/queue-depth-cache.js';
import { QueueDepths, type SampledQueue } from '../../observability/queue-depths.js';
import type { QueueSizeBounds } from '../../observability/queue-size-bounds.js';
import { QueueProbe } from '../channels/shared-channel.js';

/**
 * The depths `/metrics` shows of a process's input queues (`queues()`, as they are at each
 * reading), with their bounds: read in the background on a throwaway probe of the process's
 * connection (nothing while disconnected), served from the last reading.
 */
export function groupDepths(
  limits: Pick<QueueSizeBounds, 'maxSizes'>,
  connection: () => AmqpConnection | undefined,
  queues: () => readonly SampledQueue[],
): QueueDepthCache {
  const depths = new QueueDepths(limits, () => {
    const current = connection();
    if (current === undefined) return undefined;
    const probe = new QueueProbe();
    probe.attach(current);
    return probe;
  });
  return new QueueDepthCache(() => depths.sample(queues()));
}
