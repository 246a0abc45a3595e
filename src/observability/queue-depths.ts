import type { QueueSizeBounds } from './queue-size-bounds.js';
import type { QueueDepthSample } from './stage-metrics.js';

/** A physical queue whose depth is sampled, with the labels its series carry. */
export interface SampledQueue {
  stage: string;
  /** The logical queue. */
  queue: string;
  /** '' for a shared queue. */
  tenant: string;
  physicalQueue: string;
}

/** Where depths are read: passive declares on a channel of the process's connection (QueueProbe fits). */
export interface DepthProbe {
  /** Ready messages in `queue`; undefined when it does not exist. */
  messageCount(queue: string): Promise<number | undefined>;
  close(): Promise<void>;
}

/**
 * Ready messages in each of a list of queues, read at scrape time on a throwaway probe, with the
 * bound in force on each (management API, at the same time; see {@link QueueSizeBounds}): the
 * source of the queue-depth and capacity metrics (StageMetrics.setQueueDepthSource). A queue gone
 * (a tenant retired under a pooled process) is skipped, not the scrape.
 */
export class QueueDepths {
  /** @param openProbe a probe on the process's connection; undefined while disconnected (nothing is sampled). */
  constructor(
    private readonly limits: Pick<QueueSizeBounds, 'maxSizes'>,
    private readonly openProbe: () => DepthProbe | undefined,
  ) {}

  async sample(queues: readonly SampledQueue[]): Promise<QueueDepthSample[]> {
    const probe = this.openProbe();
    if (probe === undefined) return [];
    const bounds = this.limits.maxSizes(queues.map((queue) => queue.physicalQueue));
    try {
      const samples: QueueDepthSample[] = [];
      const maxSizes = await bounds;
      for (const queue of queues) {
        const depth = await probe.messageCount(queue.physicalQueue);
        if (depth === undefined) continue;
        const maxSize = maxSizes?.get(queue.physicalQueue);
        samples.push({ ...queue, depth, ...(maxSize === undefined ? {} : { maxSize }) });
      }
      return samples;
    } finally {
      await probe.close();
    }
  }
}
