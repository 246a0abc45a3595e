import type { ConfirmChannel, GetMessage } from 'amqplib';
import { openConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { routeFor } from '../broker/job-router.js';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor, settingsFor } from '../config/queue-resolver.js';
import { batchOf, publishRecord, settledReport } from '../tracking-stream/tracking-stream.js';
import { StagecoachError } from '../errors/errors.js';
import { fromWire, OJS_HEADERS, toWire, withoutBrokerHeaders } from '../job/amqp-mapping.js';
import type { Job, JobError } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';
import { brokerDeath } from './broker-death.js';
import { exclusiveRead, peek } from '../broker/peek.js';
import { identitiesOf } from '../security/broker-users.js';
import { createPayloadStore } from '../payload/create-payload-store.js';
import { payloadInfo, type PayloadInfo } from '../payload/payload-info.js';
import type { PayloadStore } from '../payload/payload-store.js';

export interface DeadLetterEntry {
  /** The dead-letter queue it sits in. */
  deadQueue: string;
  id: string | undefined;
  type: string | undefined;
  tenant: string | undefined;
  attempt: number | undefined;
  errorType: string | undefined;
  errorMessage: string | undefined;
  deadLetteredAt: string | undefined;
  /** False for a message that is not a job (dead-lettered as INVALID_PAYLOAD): it cannot be retried. */
  isJob: boolean;
  /**
   * For a job whose arguments travel by reference (`x-ojs-payload-ref`): the reference, its size
   * and whether the payload store still has it. Absent for a job with its arguments inline.
   */
  payload?: PayloadInfo;
}

export interface DeadRetryResult {
  retried: number;
  /** Not jobs (INVALID_PAYLOAD bodies): left in the dead-letter queue. */
  kept: number;
  /** The ids of the jobs sent back, when some were selected by id (DeadLetterSelection). */
  ids?: string[];
}

/** A dead letter with its envelope, for a job (the HTTP binding shows its arguments). */
export type DeadLetterJob = DeadLetterEntry & { job?: Job };

/** Which dead letters an action takes: every one (the default), or the jobs of these ids only (the HTTP binding's per-job endpoints). */
export interface DeadLetterSelection {
  ids?: ReadonlySet<string>;
}

/**
 * The dead-letter queues of one logical queue: `ojs.dead.<queue>` for a shared queue, or
 * `ojs.dead.<queue>.<tenant>` for the given tenant or every configured one.
 */
export function deadQueuesOf(config: CompiledConfig, queue: string, tenant?: string): string[] {
  return deadQueueOrigins(config, queue, tenant).map((origin) => origin.deadQueue);
}

/** Each dead-letter queue with the tenant it belongs to (undefined for a shared queue's). */
function deadQueueOrigins(config: CompiledConfig, queue: string, tenant?: string): Array<{ deadQueue: string; tenant?: string }> {
  const names = new BrokerNames(config.prefix);
  const resolved = queueFor(config, queue);
  if (resolved.scope === 'shared') {
    if (tenant !== undefined)
      throw new StagecoachError('INVALID_REQUEST', `queue "${queue}" is shared: it has one dead-letter queue, no --tenant`);
    return [{ deadQueue: names.deadQueue(queue) }];
  }
  const tenants = tenant === undefined ? config.tenants : [tenant];
  if (tenants.length === 0)
    throw new StagecoachError('INVALID_REQUEST', `queue "${queue}" is tenant-scoped: give --tenant or configure tenants`);
  return tenants.map((t) => ({ deadQueue: names.deadQueue(queue, t), tenant: t }));
}

/**
 * Reads dead letters without consuming them: every message is handed back. A job sent by
 * reference is shown with its payload reference and whether `payloads` (by default the
 * configured store, opened and closed here) still has it; that is asked after the messages
 * were handed back.
 */
export async function listDeadLetters(
  config: CompiledConfig,
  queue: string,
  tenant: string | undefined,
  log: Logger,
  limit = 100,
  payloads?: PayloadStore,
): Promise<DeadLetterEntry[]> {
  return (await listDeadLetterJobs(config, queue, tenant, log, limit, payloads)).map(({ job: _job, ...entry }) => entry);
}

/** listDeadLetters with each job's envelope. */
export async function listDeadLetterJobs(
  config: CompiledConfig,
  queue: string,
  tenant: string | undefined,
  log: Logger,
  limit = 100,
  payloads?: PayloadStore,
): Promise<DeadLetterJob[]> {
  // Never beside another read that holds messages, in this process or another (see exclusiveRead).
  const read = await exclusiveRead(config, log, () =>
    withConfirmChannel(config, log, async (channel) => {
      const found: Array<{ entry: DeadLetterJob; headers: Record<string, unknown> }> = [];
      for (const deadQueue of deadQueuesOf(config, queue, tenant)) {
        for (const message of await peek(channel, deadQueue, limit - found.length)) {
          found.push({ entry: describe(config, deadQueue, message), headers: message.properties.headers ?? {} });
        }
      }
      return found;
    }),
  );
  const store = payloads ?? createPayloadStore(config);
  try {
    for (const { entry, headers } of read) {
      const payload = await payloadInfo(headers, store);
      if (payload !== undefined) entry.payload = payload;
    }
  } finally {
    if (payloads === undefined) await store.close();
  }
  return read.map(({ entry }) => entry);
}

/**
 * Sends dead jobs back to their queue with a fresh attempt count. The error travels on in
 * `meta.errors` (oldest first), so the history survives any number of round trips. Each job is
 * acknowledged in the dead-letter queue only after its republish is confirmed. Bounded by the
 * messages present at the start: a job that dies again meanwhile is not retried twice.
 *
 * Routed by origin, never by claim: a tenant's dead letters go back through that tenant's own
 * exchange, whatever tenant a job names. A job that names another tenant than the dead-letter
 * queue it sits in (it was refused for that) stays where it is: no retry may move a job into
 * another tenant's queues.
 */
export async function retryDeadLetters(
  config: CompiledConfig,
  queue: string,
  tenant: string | undefined,
  log: Logger,
  selection: DeadLetterSelection = {},
): Promise<DeadRetryResult> {
  const result: DeadRetryResult = { retried: 0, kept: 0, ...(selection.ids === undefined ? {} : { ids: [] }) };
  const names = new BrokerNames(config.prefix);
  // Never beside another read that holds messages, in this process or another (see exclusiveRead).
  await exclusiveRead(config, log, () =>
    withConfirmChannel(config, log, async (channel, publisher) => {
      for (const origin of deadQueueOrigins(config, queue, tenant)) {
        const { messageCount } = await channel.checkQueue(origin.deadQueue);
        for (let i = 0; i < messageCount; i++) {
          const message = await channel.get(origin.deadQueue, { noAck: false });
          if (message === false) break;
          const job = asJob(config, message);
          // Not selected: handed back untouched when the channel closes.
          if (selection.ids !== undefined && (job === undefined || !selection.ids.has(job.id))) continue;
          if (!job) {
            result.kept++;
            continue; // handed back when the channel closes
          }
          const refused = keptBecause(config, origin.tenant, job, message);
          if (refused !== undefined) {
            log.warn(`dead letter kept: ${refused}`, { dead_queue: origin.deadQueue, job_id: job.id, tenant: origin.tenant });
            result.kept++;
            continue;
          }
          if (origin.tenant !== undefined && job.tenant !== origin.tenant) {
            log.warn('dead letter kept: it names another tenant than the queue it was found in', {
              dead_queue: origin.deadQueue,
              job_id: job.id,
              claimed_tenant: job.tenant,
              tenant: origin.tenant,
            });
            result.kept++;
            continue;
          }
          const { error, deadLetteredAt } = causeOfDeath(message.properties.headers ?? {}, job);
          const history = Array.isArray(job.meta.errors) ? (job.meta.errors as unknown[]) : [];
          const revived: Job = {
            ...job,
            queue: typeof job.meta.original_queue === 'string' ? job.meta.original_queue : job.queue,
            attempt: 1,
            meta: { ...job.meta, errors: [...history, { ...error, attempt: job.attempt, dead_lettered_at: deadLetteredAt }] },
          };
          delete revived.error;
          delete revived.meta.dead_lettered_at;
          delete revived.meta.original_queue;
          const headers = withoutBrokerHeaders(message.properties.headers, [
            OJS_HEADERS.errorType,
            OJS_HEADERS.errorMessage,
            OJS_HEADERS.originQueue,
            OJS_HEADERS.originTenant,
            OJS_HEADERS.originVariant,
          ]);
          const traceparent = headers[OJS_HEADERS.traceparent];
          const wire = toWire(revived, {
            tenantHeader: config.tenantHeader,
            headers,
            ...(typeof traceparent === 'string' ? { traceparent } : {}),
          });
          // The entry of the queue for the tenant the letter belongs to (its type still checked).
          const route = routeFor(config, revived);
          const exchange =
            origin.tenant !== undefined && route.exchange === names.root ? names.tenantExchange(origin.tenant) : route.exchange;
          // The job store learns the job waits again (attempt 1 after the dead one) before it can run.
          if (settingsFor(config, revived.queue, origin.tenant ?? revived.tenant).tracking !== false) {
            const report = settledReport(
              job,
              batchOf(job),
              { stage: 'stagecoach/dead-retry', queue: revived.queue, tenant: origin.tenant },
              'retrying',
              {
                next_attempt: 1,
              },
            );
            await publishRecord(publisher, names.tracking, report);
          }
          await publisher.publish(exchange, route.routingKey, wire.content, wire.options);
          channel.ack(message);
          result.retried++;
          result.ids?.push(job.id);
        }
      }
    }),
  );
  log.info('dead letters retried', { queue, tenant, retried: result.retried, kept: result.kept });
  return result;
}

/**
 * Drops the dead letters of the jobs `ids` (each acknowledged in its dead-letter queue; the others
 * are handed back untouched); returns the ids dropped. Bounded by the messages present at the
 * start. The payloads of jobs sent by reference stay until the sweep, as with purgeDeadLetters.
 */
export async function deleteDeadLetters(
  config: CompiledConfig,
  queue: string,
  tenant: string | undefined,
  ids: ReadonlySet<string>,
  log: Logger,
): Promise<string[]> {
  const deleted: string[] = [];
  await exclusiveRead(config, log, () =>
    withConfirmChannel(config, log, async (channel) => {
      for (const deadQueue of deadQueuesOf(config, queue, tenant)) {
        const { messageCount } = await channel.checkQueue(deadQueue);
        for (let i = 0; i < messageCount; i++) {
          const message = await channel.get(deadQueue, { noAck: false });
          if (message === false) break;
          const job = asJob(config, message);
          if (job === undefined || !ids.has(job.id)) continue;
          channel.ack(message);
          deleted.push(job.id);
        }
      }
    }),
  );
  log.info('dead letters deleted', { queue, tenant, deleted });
  return deleted;
}

/**
 * Why a dead letter must not be sent back (or a job moved to another queue), with
 * broker-enforced tenants: it was refused because its publisher may not act for its tenant, or
 * its own `user_id` (a dead letter written straight into this queue) may not act for the tenant
 * whose queue it sits in. `dead retry` and `queue delete --strategy move` republish as the
 * operator, whom every stage trusts: they must not launder a job nobody entitled put there.
 */
export function keptBecause(config: CompiledConfig, originTenant: string | undefined, job: Job, message: GetMessage): string | undefined {
  if (!config.security.tenantUsers) return undefined;
  const headers = message.properties.headers ?? {};
  if (headers[OJS_HEADERS.errorType] === 'TENANT_MISMATCH') return 'it was refused as TENANT_MISMATCH';
  const publisher: unknown = message.properties.userId;
  if (!identitiesOf(config).mayActFor(originTenant ?? job.tenant, publisher)) {
    return `its publisher (${typeof publisher === 'string' ? publisher : 'none'}) may not act for tenant "${originTenant ?? job.tenant ?? '(none)'}"`;
  }
  return undefined;
}

/**
 * Empties the dead-letter queue(s) on the broker (one `queue.purge` each, no message read);
 * returns how many messages were dropped. The payloads of jobs sent by reference stay in the
 * store until the sweep takes them after `payloads.retention` (docs/payloads.md).
 */
export async function purgeDeadLetters(config: CompiledConfig, queue: string, tenant: string | undefined, log: Logger): Promise<number> {
  return withConfirmChannel(config, log, async (channel) => {
    let purged = 0;
    for (const deadQueue of deadQueuesOf(config, queue, tenant)) purged += (await channel.purgeQueue(deadQueue)).messageCount;
    log.info('dead letters purged', { queue, tenant, purged });
    return purged;
  });
}

function asJob(config: CompiledConfig, message: GetMessage): Job | undefined {
  try {
    return fromWire(message, config.tenantHeader).job;
  } catch {
    return undefined;
  }
}

function describe(config: CompiledConfig, deadQueue: string, message: GetMessage): DeadLetterJob {
  const headers = (message.properties.headers ?? {}) as Record<string, unknown>;
  const job = asJob(config, message);
  const { error, deadLetteredAt } = causeOfDeath(headers, job);
  return {
    deadQueue,
    id: job?.id ?? str(message.properties.messageId),
    type: job?.type ?? str(message.properties.type),
    tenant: job?.tenant ?? str(headers[config.tenantHeader]),
    attempt: job?.attempt,
    errorType: error?.type,
    errorMessage: error?.message,
    deadLetteredAt,
    isJob: job !== undefined,
    ...(job === undefined ? {} : { job }),
  };
}

/**
 * Why and when a dead letter died. A stage states it: in the envelope's `error` for a job, in
 * the `x-ojs-error-*` headers for a message that is not one (a job's headers may be stale: a
 * retry keeps them, not its `error`). A dead letter the broker made itself (expiry, overflow,
 * reject) has only its `x-death`. The stage's word comes first: its dead letters copy the
 * delivery's headers, `x-death` entries from the delay ladder included.
 */
export function causeOfDeath(
  headers: Readonly<Record<string, unknown>>,
  job: Job | undefined,
): { error: JobError | undefined; deadLetteredAt: string | undefined } {
  // A stage that dead-lettered a message as it came (not trusted as a job: a publisher that may
  // not act for its tenant) states the reason in headers, with `x-ojs-dead-lettered-at`.
  const stated =
    job?.error ?? (job === undefined || headers['x-ojs-dead-lettered-at'] !== undefined ? statedInHeaders(headers) : undefined);
  const stagedAt = job ? str(job.meta.dead_lettered_at) : str(headers['x-ojs-dead-lettered-at']);
  if (stated) return { error: stated, deadLetteredAt: stagedAt };
  const death = brokerDeath(headers);
  if (!death) return { error: undefined, deadLetteredAt: stagedAt };
  return { error: { type: death.type, message: death.message }, deadLetteredAt: death.at ?? stagedAt };
}

function statedInHeaders(headers: Readonly<Record<string, unknown>>): JobError | undefined {
  const type = str(headers[OJS_HEADERS.errorType]);
  if (type === undefined) return undefined;
  return { type, message: str(headers[OJS_HEADERS.errorMessage]) ?? '' };
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** One connection, one confirm channel for reads and a publisher; unacknowledged reads go back on close. */
async function withConfirmChannel<T>(
  config: CompiledConfig,
  log: Logger,
  action: (channel: ConfirmChannel, publisher: ConfirmPublisher) => Promise<T>,
): Promise<T> {
  const connection = await openConnection(config, log, 'stagecoach-dead');
  try {
    const channel = await connection.createConfirmChannel();
    const publisher = await ConfirmPublisher.open(connection);
    const result = await action(channel, publisher);
    await publisher.close();
    await channel.close();
    return result;
  } finally {
    await connection.close().catch(() => undefined);
  }
}
