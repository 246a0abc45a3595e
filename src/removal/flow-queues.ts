import type { CompiledConfig } from '../config/config.types.js';
import { openConnection } from '../broker/amqp-connection.js';
import type { Logger } from '../logging/logger.js';
import { parseBrokerName } from '../topology/names.js';

/**
 * The flow limits' queues of what `tenant retire` and `queue delete` remove (docs/flow-control.md):
 * a bucket's tokens, ledger and cooldown queues are named `<prefix>.flow.<bucket id>[.ledger|
 * .cooldown]`, the bucket id `<partition>.<strategy>[.<cooldown ms>]`. A partition belongs to a
 * tenant when it is that tenant's share of a per-tenant limit (`<key>@<tenant>`) or the limits of
 * one of its physical queues (`queue:<physical queue>`); to a logical queue when it is the limits
 * of one of its physical queues. Shared named limits belong to neither and stay.
 *
 * A bucket's `.lock` queue is exclusive to the process resizing it and goes with its connection:
 * it is never listed here (deleting it would fail with RESOURCE_LOCKED while one holds it).
 */
const FLOW_QUEUE = /^(.+)\.(concurrency|rate\.\d+|throttle\.\d+)(\.ledger|\.cooldown)?$/;

/** The partition a flow queue serves, or undefined when `name` is not one (or is a `.lock`). */
export function flowPartitionOf(prefix: string, name: string): string | undefined {
  const head = `${prefix}.flow.`;
  if (!name.startsWith(head)) return undefined;
  return FLOW_QUEUE.exec(name.slice(head.length))?.[1];
}

/** Whether a flow partition is tenant `tenant`'s own. */
export function isTenantPartition(prefix: string, partition: string, tenant: string): boolean {
  if (partition.endsWith(`@${tenant}`)) return true;
  return physicalOf(prefix, partition)?.tenant === tenant;
}

/** Whether a flow partition holds the limits of a physical queue of `queue` (of `tenant` only, when given). */
export function isQueuePartition(prefix: string, partition: string, queue: string, tenant?: string): boolean {
  const parsed = physicalOf(prefix, partition);
  return parsed?.queue === queue && (tenant === undefined || parsed.tenant === tenant);
}

function physicalOf(prefix: string, partition: string): ReturnType<typeof parseBrokerName> {
  if (!partition.startsWith('queue:')) return undefined;
  const parsed = parseBrokerName(prefix, partition.slice('queue:'.length));
  return parsed?.kind === 'queue' ? parsed : undefined;
}

/**
 * Deletes flow queues. Their messages are tokens, not jobs: nothing is lost. A process still
 * consuming one has its consumer cancelled by the broker and declares the bucket again if it
 * needs it.
 */
export async function deleteFlowQueues(config: CompiledConfig, names: readonly string[], log: Logger): Promise<void> {
  if (names.length === 0) return;
  const connection = await openConnection(config, log, 'stagecoach-remove-flow');
  try {
    const channel = await connection.createChannel();
    for (const name of names) await channel.deleteQueue(name);
    await channel.close();
  } finally {
    await connection.close();
  }
  log.info('flow limit queues deleted', { queues: names.length });
}
