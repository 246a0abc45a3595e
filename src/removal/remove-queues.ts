import type { Channel, GetMessage, Options } from 'amqplib';
import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { flowPartitionOf } from './flow-queues.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { fromWire, OJS_HEADERS, toWire, withoutBrokerHeaders, type WireMessage } from '../job/amqp-mapping.js';
import type { HeaderValue, Job } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import { vhostOfAmqpUrl } from '../security/broker-users.js';
import type { BrokerBinding, ManagementClient } from '../broker-management/management-client.js';
import { BrokerNames, parseBrokerName, type ParsedBrokerName } from '../topology/names.js';
import { keptBecause } from '../dead-letters/dead-letter-actions.js';
import { peek } from '../broker/peek.js';
import { deleteIfEmpty } from './delete-if-empty.js';
import { discardReported } from './discard-reports.js';
import { inParallel } from '../util/in-parallel.js';

/**
 * The strategies of OJS queue configuration 5.3 for what a removed queue still holds:
 * - `reject`: refuse while any job remains (main, due, suspect or dead-letter queue), and list
 *   them; nothing is touched;
 * - `discard`: drop them, and count what was dropped (a tracked job reported `discarded` first: discard-reports.ts);
 * - `move`: send every job to the target logical queue of the same tenant, each confirmed by
 *   the broker before its original is acknowledged; dead letters go to the target's dead letters.
 */
export type RemovalStrategy = 'reject' | 'discard' | 'move';
export const STRATEGIES: readonly RemovalStrategy[] = ['reject', 'discard', 'move'];

/** One physical queue to remove. */
export interface DoomedQueue {
  name: string;
  /** `queue` (main, variants included), `due`, `suspect` or `dead`. */
  role: 'queue' | 'due' | 'suspect' | 'dead';
  /** Its logical queue. */
  queue: string;
  /** Its tenant; undefined for a shared queue's. */
  tenant?: string;
}

/** Everything a removal takes off the broker, found beforehand (retire-tenant.ts, delete-queue.ts). */
export interface Removal {
  queues: DoomedQueue[];
  /** Exchanges that route into those queues and go with them (a tenant's, its variant routers). */
  exchanges: string[];
  /** Every binding into the queues: cut before they are emptied, so nothing arrives meanwhile. */
  bindings: BrokerBinding[];
  strategy: RemovalStrategy;
  /** For `move`: the target logical queue (checked by the caller: same tenant, the right scope). */
  target?: string;
  /** For `move`: the target's physical queues (main and dead letters), which must exist before anything is moved. */
  targetQueues?: string[];
}

export interface QueueOutcome {
  name: string;
  /** Messages in the queue when the removal started. */
  jobs: number;
  /** Ids of some of them (dead-letter queues only, see `listIds`). */
  ids: string[];
  discarded: number;
  moved: number;
  /** Left in the queue (move): not jobs of its tenant, or refused with broker-enforced tenants. */
  kept: number;
  /** Why, one line per kept message (at most 10). */
  keptBecause: string[];
  deleted: boolean;
}

export interface RemovalOutcome {
  /** True when every queue and exchange is gone. */
  removed: boolean;
  /** Why not, when not. */
  reason?: string;
  queues: QueueOutcome[];
  exchanges: string[];
}

/** Most ids `reject` lists per queue. */
const LISTED_IDS = 5;

/**
 * Carries out a removal with its strategy. Preconditions, checked first on the broker: no queue
 * has a consumer (a running stage would declare the queue again, or lose the jobs in its hands),
 * and with `reject` no queue holds a message. Then the inflow is cut (bindings into the queues,
 * the exchanges: new jobs for them land in `unroutable`, as do jobs the delay ladder brings back
 * later), the queues are emptied by the strategy and deleted (only if empty, for `reject` and
 * `move`: a message that came anyway is never deleted unseen).
 */
export async function removeQueues(config: CompiledConfig, removal: Removal, log: Logger): Promise<RemovalOutcome> {
  const connection = await openConnection(config, log, 'stagecoach-remove');
  try {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    const outcomes: QueueOutcome[] = [];
    for (const queue of removal.queues) {
      const { messageCount, consumerCount } = await checked(channel, queue.name);
      if (consumerCount > 0) {
        throw new StagecoachError(
          'CONFLICT',
          `queue "${queue.name}" has ${consumerCount} consumer${consumerCount === 1 ? '' : 's'}: stop the stages reading it first ` +
            `(stagecoach terminate${queue.tenant === undefined ? '' : ` --tenant ${queue.tenant}`}), then remove it`,
        );
      }
      outcomes.push({ name: queue.name, jobs: messageCount, ids: [], discarded: 0, moved: 0, kept: 0, keptBecause: [], deleted: false });
    }
    for (const target of removal.targetQueues ?? []) {
      await channel.checkQueue(target).catch((err: unknown) => {
        throw new StagecoachError('NOT_FOUND', `the move target "${target}" does not exist: provision it first`, { cause: err });
      });
    }
    await channel.close();

    const remaining = outcomes.reduce((sum, outcome) => sum + outcome.jobs, 0);
    if (removal.strategy === 'reject' && remaining > 0) {
      await listIds(connection, removal.queues, outcomes);
      return { removed: false, reason: `${remaining} job${remaining === 1 ? '' : 's'} remain`, queues: outcomes, exchanges: [] };
    }

    await cutInflow(connection, removal, log);
    for (const [index, queue] of removal.queues.entries()) {
      const outcome = outcomes[index];
      if (removal.strategy === 'move') await moveJobs(config, connection, queue, removal.target as string, outcome, log);
      if (removal.strategy === 'discard') outcome.discarded += await discardReported(config, connection, queue, log);
      // A queue no longer configured (queue delete) had the `_default` type, as far as the configuration knows.
      const quorum = (config.queues.get(queue.queue) ?? config.defaultQueue).type === 'quorum';
      outcome.deleted = await deleteQueue(connection, queue.name, removal.strategy === 'discard', outcome, quorum);
    }
    const left = outcomes.filter((outcome) => !outcome.deleted);
    return {
      removed: left.length === 0,
      ...(left.length === 0
        ? {}
        : {
            reason:
              `${left.map((o) => o.name).join(', ')} kept: ` +
              (removal.strategy === 'move'
                ? 'messages that could not be moved remain (see why); --strategy discard drops them'
                : 'jobs arrived after the check (the queues are unbound now: run the removal again)'),
          }),
      queues: outcomes,
      exchanges: removal.exchanges,
    };
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** Passive declare on a throwaway channel: counts, or NOT_FOUND. */
async function checked(channel: Channel, queue: string): Promise<{ messageCount: number; consumerCount: number }> {
  try {
    return await channel.checkQueue(queue);
  } catch (err) {
    throw new StagecoachError('NOT_FOUND', `queue "${queue}" disappeared while being removed (${(err as Error).message})`, { cause: err });
  }
}

/**
 * Ids of what `reject` refuses for, from the dead-letter queues only: reading a message hands it
 * back marked redelivered, which for a main, due or suspect queue means "the process holding it
 * crashed" to the next stage (one more attempt, a turn as a suspect). Dead letters are never
 * consumed by stages, so `dead list` reads them the same way.
 */
async function listIds(connection: AmqpConnection, queues: DoomedQueue[], outcomes: QueueOutcome[]): Promise<void> {
  const channel = await connection.createChannel();
  try {
    for (const [index, queue] of queues.entries()) {
      if (queue.role !== 'dead' || outcomes[index].jobs === 0) continue;
      outcomes[index].ids = (await peek(channel, queue.name, LISTED_IDS)).map(
        (message) => (message.properties.messageId as string | undefined) ?? '(no id)',
      );
    }
  } finally {
    await channel.close().catch(() => undefined);
  }
}

async function cutInflow(connection: AmqpConnection, removal: Removal, log: Logger): Promise<void> {
  const channel = await connection.createChannel();
  try {
    for (const binding of removal.bindings) {
      const args = binding.arguments as Record<string, string>;
      await channel.unbindQueue(binding.destination, binding.source, binding.routing_key, args);
    }
    for (const exchange of removal.exchanges) await channel.deleteExchange(exchange);
  } finally {
    await channel.close().catch(() => undefined);
  }
  log.info('inflow cut', { bindings: removal.bindings.length, exchanges: removal.exchanges });
}

/**
 * Moves every message of `queue` to `target` of its tenant: a job (its `queue` now the target)
 * through the target's entry, so that variants still pick their queue; a dead letter to the
 * target's dead letters. Each is acknowledged only once its copy is confirmed. A message that is
 * not a job of the queue's tenant, or (broker-enforced tenants) was not published by someone
 * who may act for that tenant, is kept: the operator republishes in its name, and must not vouch
 * for it.
 */
async function moveJobs(
  config: CompiledConfig,
  connection: AmqpConnection,
  queue: DoomedQueue,
  target: string,
  outcome: QueueOutcome,
  log: Logger,
): Promise<void> {
  const names = new BrokerNames(config.prefix);
  const channel = await connection.createChannel();
  const publisher = await ConfirmPublisher.open(connection);
  try {
    for (;;) {
      const message = await channel.get(queue.name, { noAck: false });
      if (message === false) break;
      const job = asJob(config, message);
      const refusal = refusedMove(config, queue, job, message);
      if (refusal !== undefined) {
        // Unacknowledged: handed back when the channel closes, and the queue is not deleted.
        outcome.kept++;
        if (outcome.keptBecause.length < 10) outcome.keptBecause.push(`${messageId(message)}: ${refusal}`);
        continue;
      }
      const shared = queue.tenant === undefined || isShared(config, target);
      if (queue.role === 'dead') {
        // Straight into the target's dead-letter queue (checked to exist): the dead-letter
        // exchange has no alternate exchange, and would drop what no binding takes.
        const deadQueue = names.deadQueue(target, shared ? undefined : queue.tenant);
        const wire = job === undefined ? undefined : retargeted(config, job, target, message, true);
        await publisher.publish('', deadQueue, wire?.content ?? message.content, wire?.options ?? asIs(message));
      } else {
        // Through the entry, so that a variant still picks its queue; what no queue takes is kept in unroutable.
        const wire = retargeted(config, job as Job, target, message);
        await publisher.publish(shared ? names.direct : names.tenantExchange(queue.tenant as string), target, wire.content, wire.options);
      }
      channel.ack(message);
      outcome.moved++;
    }
  } finally {
    await publisher.close().catch(() => undefined);
    await channel.close().catch(() => undefined);
  }
  log.info('jobs moved', { queue: queue.name, target, moved: outcome.moved, kept: outcome.kept });
}

function refusedMove(config: CompiledConfig, queue: DoomedQueue, job: Job | undefined, message: GetMessage): string | undefined {
  // A dead letter that is not a job (an INVALID_PAYLOAD body) moves as it is: it can never be retried.
  if (job === undefined) return queue.role === 'dead' ? undefined : 'not a job';
  if (queue.tenant !== undefined && job.tenant !== queue.tenant)
    return `it names tenant "${job.tenant ?? '(none)'}", not "${queue.tenant}"`;
  return keptBecause(config, queue.tenant, job, message);
}

/**
 * The job with the target as its queue (so that `dead retry` of the target sends a moved dead
 * letter to the target), on the wire again. A live job starts without the broker's headers; a
 * dead letter keeps all of its own: the broker's record of its death and where it died.
 */
function retargeted(config: CompiledConfig, job: Job, target: string, message: GetMessage, dead = false): WireMessage {
  const moved: Job = { ...job, queue: target, meta: { ...job.meta } };
  if (typeof moved.meta.original_queue === 'string') moved.meta.original_queue = target;
  const headers = dead
    ? ({ ...message.properties.headers } as Record<string, HeaderValue>)
    : withoutBrokerHeaders(message.properties.headers);
  const traceparent = headers[OJS_HEADERS.traceparent];
  return toWire(moved, { tenantHeader: config.tenantHeader, headers, ...(typeof traceparent === 'string' ? { traceparent } : {}) });
}

/** A message that is not a job, republished as it came (the publisher stamps its own user_id, if any). */
function asIs(message: GetMessage): Options.Publish {
  const properties: Options.Publish = { ...(message.properties as Options.Publish) };
  delete properties.userId;
  return properties;
}

function isShared(config: CompiledConfig, queue: string): boolean {
  return (config.queues.get(queue)?.scope ?? config.defaultQueue.scope) === 'shared';
}

/**
 * Deletes the queue: with `discard` whatever it holds (counted), otherwise only if empty, so a
 * message that arrived unseen is never dropped. @returns whether it is gone.
 */
async function deleteQueue(
  connection: AmqpConnection,
  queue: string,
  discard: boolean,
  outcome: QueueOutcome,
  quorum: boolean,
): Promise<boolean> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  try {
    outcome.discarded += discard ? (await channel.deleteQueue(queue)).messageCount : await deleteIfEmpty(channel, queue, quorum);
    await channel.close();
    return true;
  } catch (err) {
    // 406 PRECONDITION_FAILED (classic) or deleteIfEmpty's own word (quorum): not empty.
    if (/PRECONDITION|not empty/i.test((err as Error).message)) return false;
    throw err;
  }
}

function asJob(config: CompiledConfig, message: GetMessage): Job | undefined {
  try {
    return fromWire(message, config.tenantHeader).job;
  } catch {
    return undefined;
  }
}

function messageId(message: GetMessage): string {
  return (message.properties.messageId as string | undefined) ?? '(no id)';
}

/**
 * What a removal takes, found on the broker by name (management API): the queues under the
 * prefix whose parts `match` (main, variants, due, suspect, dead), the exchanges `exchange`
 * accepts, and every binding into those queues.
 */
export async function findRemoval(
  config: CompiledConfig,
  api: ManagementClient,
  match: {
    queue: (parsed: ParsedBrokerName) => boolean;
    exchange: (parsed: ParsedBrokerName) => boolean;
    /** Flow-limit partitions whose queues go too (flow-queues.ts). */
    flow: (partition: string) => boolean;
    /**
     * A regular expression every name the predicates above take matches (a superset is fine):
     * the broker filters the listings by it, and the bindings are read per doomed queue. With
     * 2,000 tenants, listing every queue and binding took 10 s per retirement on a loaded broker.
     */
    named?: string;
  },
): Promise<{ queues: DoomedQueue[]; exchanges: string[]; bindings: BrokerBinding[]; flow: string[] }> {
  const vhost = vhostOfAmqpUrl(config.broker.url);
  const [queues, exchanges] = await Promise.all([api.listQueues(vhost, match.named), api.listExchanges(vhost, match.named)]);
  const doomed: DoomedQueue[] = [];
  const flow: string[] = [];
  for (const queue of queues) {
    const partition = flowPartitionOf(config.prefix, queue.name);
    if (partition !== undefined && match.flow(partition)) flow.push(queue.name);
    const parsed = parseBrokerName(config.prefix, queue.name);
    if (parsed?.queue === undefined || !ROLES.has(parsed.kind) || !match.queue(parsed)) continue;
    doomed.push({
      name: queue.name,
      role: parsed.kind as DoomedQueue['role'],
      queue: parsed.queue,
      ...(parsed.tenant === undefined ? {} : { tenant: parsed.tenant }),
    });
  }
  // Main queues first, dead letters last: what `reject` lists reads in that order.
  doomed.sort((a, b) => ROLE_ORDER.indexOf(a.role) - ROLE_ORDER.indexOf(b.role) || a.name.localeCompare(b.name));
  const names = new Set(doomed.map((queue) => queue.name));
  // A few queues: their own bindings, a call each; many (a queue of every tenant): one listing.
  let bindings: BrokerBinding[] = [];
  if (match.named !== undefined && doomed.length <= BINDINGS_PER_QUEUE_MAX) {
    await inParallel(doomed, 4, async (queue) => {
      bindings.push(...(await api.bindingsTo(vhost, queue.name)));
    });
  } else {
    bindings = await api.listBindings(vhost);
  }
  return {
    queues: doomed,
    exchanges: exchanges
      .map((exchange) => exchange.name)
      .filter((name) => {
        const parsed = parseBrokerName(config.prefix, name);
        return parsed !== undefined && match.exchange(parsed);
      })
      .sort(),
    bindings: bindings.filter((binding) => binding.source !== '' && binding.destination_type === 'queue' && names.has(binding.destination)),
    flow: flow.sort(),
  };
}

/** Up to this many doomed queues, their bindings are read queue by queue rather than listed all. */
const BINDINGS_PER_QUEUE_MAX = 64;

const ROLE_ORDER: ReadonlyArray<DoomedQueue['role']> = ['queue', 'due', 'suspect', 'dead'];
const ROLES: ReadonlySet<string> = new Set(ROLE_ORDER);
