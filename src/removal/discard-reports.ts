import type { GetMessage } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import { settingsFor } from '../config/queue-resolver.js';
import { fromWire } from '../job/amqp-mapping.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';
import { ensureTrackingStream } from '../tracking-stream/tracking-reader.js';
import { stamp, type SettledReport } from '../tracking-stream/tracking-report.js';
import { publishRecord } from '../tracking-stream/tracking-stream.js';

/** A queue being removed, as remove-queues.ts describes it. */
interface Doomed {
  name: string;
  role: 'queue' | 'due' | 'suspect' | 'dead';
  queue: string;
  tenant?: string;
}

/** The error a job discarded with its queue is reported with. */
export const QUEUE_DELETED = 'QUEUE_DELETED';
/** Reports in flight at once while a queue is emptied. */
const WINDOW = 256;

/**
 * Empties a queue removed with `--strategy discard` job by job, reporting each job `discarded`
 * (error QUEUE_DELETED) to the tracking stream before acknowledging it: the job store and its
 * batch then show it gone, not still waiting. Only for a queue whose jobs are tracked, and not for
 * dead letters (already `discarded` there). What arrives after the last one read is dropped with
 * the queue, counted, as before. @returns how many it discarded.
 */
export async function discardReported(config: CompiledConfig, connection: AmqpConnection, queue: Doomed, log: Logger): Promise<number> {
  if (queue.role === 'dead' || settingsFor(config, queue.queue, queue.tenant).tracking === false) return 0;
  let discarded = 0;
  await ensureTrackingStream(connection, config, 'tracking');
  const stream = new BrokerNames(config.prefix).tracking;
  const channel = await connection.createChannel();
  const publisher = await ConfirmPublisher.open(connection);
  const pending: Array<Promise<void>> = [];
  try {
    for (;;) {
      const message = await channel.get(queue.name, { noAck: false });
      if (message === false) break;
      pending.push(publishRecord(publisher, stream, reportOf(config, queue, message)).then(() => channel.ack(message)));
      if (pending.length >= WINDOW) await Promise.all(pending.splice(0));
      discarded++;
    }
    await Promise.all(pending);
  } finally {
    await publisher.close().catch(() => undefined);
    await channel.close().catch(() => undefined);
  }
  log.info('jobs discarded and reported', { queue: queue.name, discarded });
  return discarded;
}

function reportOf(config: CompiledConfig, queue: Doomed, message: GetMessage): SettledReport {
  let job;
  try {
    job = fromWire(message, config.tenantHeader).job;
  } catch {
    job = undefined;
  }
  const batch = job?.meta.batch;
  const tenant = job?.tenant ?? queue.tenant;
  return stamp<SettledReport>({
    kind: 'settled',
    job: job?.id ?? (message.properties.messageId as string | undefined) ?? '(no id)',
    ...(typeof batch === 'string' ? { batch } : {}),
    ...(tenant === undefined ? {} : { tenant }),
    stage: 'stagecoach',
    queue: queue.queue,
    ...(job === undefined ? {} : { type: job.type }),
    outcome: 'discarded',
    attempt: job?.attempt ?? 1,
    error: { type: QUEUE_DELETED, message: `its queue ${queue.name} was removed with --strategy discard` },
  });
}
