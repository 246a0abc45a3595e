import type { GetMessage } from 'amqplib';
import { exclusiveRead } from '../broker/peek.js';
import { openConnection, type AmqpConnection } from '../broker/amqp-connection.js';
import { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import { publishControl } from '../control/send-control.js';
import { StagecoachError } from '../errors/errors.js';
import { BrokerFlags } from '../flags/broker-flags.js';
import type { DirectiveFlag } from '../flags/flag.js';
import { fromWire, OJS_HEADERS, PENDING_PARK, withoutBrokerHeaders } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
import type { Logger } from '../logging/logger.js';
import { checkKnownTenant } from '../queue-state/set-queue-state.js';
import { coreTopology } from '../topology/build-topology.js';
import { delayRoutingKey } from '../topology/delay-topology.js';
import { BrokerNames, parseBrokerName, parkKey } from '../topology/names.js';
import { checkBatchId } from '../util/batch-id.js';
import { checkTenantSlug } from '../util/tenant-slug.js';
import { batchState } from '../batch/batch-fold.js';
import { readTracking } from '../tracker/tracker.js';
import { publishRecord } from '../tracking-stream/tracking-stream.js';
import { stamp, type DirectiveRecord } from '../tracking-stream/tracking-report.js';

/** What a directive did. */
export interface DirectiveResult {
  action: DirectiveRecord['action'];
  batch?: string;
  tenant?: string;
  /** Parked jobs sent back to their queues (`resume`, and `cancel`, which lets stages discard them). */
  moved: number;
  /** Parked jobs left in the parked queue because they could not be sent back (logged with the reason). */
  kept: number;
}

/**
 * Between the two passes of `resume` over the parked queue: a stage that read the pause flag
 * just before it went parks its job right after; the second pass sends that one on too.
 */
export const RESUME_GRACE_MS = 1000;

/**
 * `batch cancel <B>` (docs/batches.md): every job of the batch that a stage meets from now on is
 * discarded unrun and reported `cancelled`; jobs running now finish. The batch completes as
 * `cancelled` once nothing of it is in flight. Jobs of it parked by a pause are sent on, so that
 * stages discard them too, and its pause ends.
 * @param tenant whose batch of that id (a workflow's cancel names its tenant); without one, every
 * tenant's batch of that id, as the stages' flag is.
 * @throws StagecoachError NOT_FOUND when no report names the batch; INVALID_REQUEST when it is
 * already complete (nothing left to cancel).
 */
export async function cancelBatch(config: CompiledConfig, batch: string, log: Logger, tenant?: string): Promise<DirectiveResult> {
  checkBatchId(batch, 'batch');
  const fold = await readTracking(config, log);
  const known = tenant === undefined ? fold.batchesNamed(batch) : [fold.batch(batch, tenant)].filter((found) => found !== undefined);
  if (known.length === 0) throw new StagecoachError('NOT_FOUND', `no batch "${batch}" in the tracking stream`);
  const running = known.filter((found) => batchState(found) === 'running');
  if (running.length === 0) throw new StagecoachError('INVALID_REQUEST', `batch "${batch}" is already ${batchState(known[0]!)}`);
  const only = running.length === 1 ? running[0]!.tenant : undefined;
  return withConnection(config, log, async (connection, flags) => {
    await flags.clear({ kind: 'batch-paused', batch });
    await direct(connection, config, flags, { kind: 'batch-cancelled', batch }, true, 'cancel', { batch }, tenant ?? only);
    return { action: 'cancel', batch, ...(await resumeParked(connection, config, log, (p) => p.batch === batch && p.by !== PENDING_PARK)) };
  });
}

/** `batch pause <B>`: jobs of the batch that reach any stage from now on are parked, not run; running ones finish. */
export async function pauseBatch(config: CompiledConfig, batch: string, log: Logger): Promise<DirectiveResult> {
  checkBatchId(batch, 'batch');
  return withConnection(config, log, async (connection, flags) => {
    if (await flags.isSet({ kind: 'batch-cancelled', batch })) {
      throw new StagecoachError('INVALID_REQUEST', `batch "${batch}" is cancelled: there is nothing to pause`);
    }
    await direct(connection, config, flags, { kind: 'batch-paused', batch }, true, 'pause', { batch });
    return { action: 'pause', batch, moved: 0, kept: 0 };
  });
}

/** `batch resume <B>`: the pause ends and the jobs it parked go back where they were going. */
export async function resumeBatch(config: CompiledConfig, batch: string, log: Logger): Promise<DirectiveResult> {
  checkBatchId(batch, 'batch');
  return withConnection(config, log, async (connection, flags) => {
    await direct(connection, config, flags, { kind: 'batch-paused', batch }, false, 'resume', { batch });
    return { action: 'resume', batch, ...(await resumeParked(connection, config, log, (p) => p.batch === batch && p.by === 'batch')) };
  });
}

/** `tenant pause <T>`: every job of the tenant that reaches any stage (shared ones too) is parked. */
export async function pauseTenant(config: CompiledConfig, tenant: string, log: Logger): Promise<DirectiveResult> {
  checkTenantSlug(tenant, 'tenant');
  return withConnection(config, log, async (connection, flags) => {
    await checkKnownTenant(config, connection, tenant);
    await direct(connection, config, flags, { kind: 'tenant-paused', tenant }, true, 'pause', { tenant });
    return { action: 'pause', tenant, moved: 0, kept: 0 };
  });
}

/** `tenant resume <T>`: the tenant's pause ends and the jobs it parked go back. */
export async function resumeTenant(config: CompiledConfig, tenant: string, log: Logger): Promise<DirectiveResult> {
  checkTenantSlug(tenant, 'tenant');
  return withConnection(config, log, async (connection, flags) => {
    await direct(connection, config, flags, { kind: 'tenant-paused', tenant }, false, 'resume', { tenant });
    const key = parkKey(tenant);
    return { action: 'resume', tenant, ...(await resumeParked(connection, config, log, (p) => p.key === key && p.by === 'tenant')) };
  });
}

/** What `resume` reads of a parked message to choose it. */
export interface ParkedJob {
  /** The routing key it was parked with: its tenant (`_` for none). */
  key: string;
  by: string | undefined;
  batch: string | undefined;
}

/**
 * Two passes over the parked queue a grace apart (see RESUME_GRACE_MS), each sending on what
 * `pick` chooses, through the delay ladder with no delay to the queue recorded at parking (the
 * instance's `due`, or `suspect`): as a hand-back, the same attempt, never refused for
 * `max_size`. Messages not chosen stay, in their order (unacknowledged, then handed back with the
 * channel). A parked message whose return queue is not of the tenant it was parked for (its
 * routing key, which a tenant user's topic permission fixes to its own tenant) is not sent on:
 * `resume` republishes as the operator, whom every stage trusts.
 */
async function resumeParked(
  connection: AmqpConnection,
  config: CompiledConfig,
  log: Logger,
  pick: (parked: ParkedJob) => boolean,
): Promise<{ moved: number; kept: number }> {
  // Never beside another read that holds messages, in this process or another (see exclusiveRead).
  const first = await exclusiveRead(config, log, () => movePass(connection, config, log, pick));
  await new Promise((resolve) => setTimeout(resolve, RESUME_GRACE_MS));
  const second = await exclusiveRead(config, log, () => movePass(connection, config, log, pick));
  return { moved: first.moved + second.moved, kept: second.kept };
}

async function movePass(
  connection: AmqpConnection,
  config: CompiledConfig,
  log: Logger,
  pick: (parked: ParkedJob) => boolean,
): Promise<{ moved: number; kept: number }> {
  const names = new BrokerNames(config.prefix);
  const channel = await connection.createChannel();
  const publisher = await ConfirmPublisher.open(connection);
  let moved = 0;
  let kept = 0;
  try {
    // Only what is there now: jobs parked meanwhile (this pass sends on nothing that parks again at once).
    const { messageCount } = await channel.checkQueue(names.parked);
    for (let i = 0; i < messageCount; i++) {
      const message = await channel.get(names.parked, { noAck: false });
      if (message === false) break;
      const job = decoded(config, message);
      const parked = parkedJob(message, job);
      if (!pick(parked)) continue; // handed back when the channel closes
      const back = returnQueueOf(config, message, parked.key, job);
      if (typeof back !== 'string') {
        log.warn(`parked job kept: ${back.reason}`, { job_id: message.properties.messageId, key: parked.key });
        kept++;
        continue;
      }
      const headers = withoutBrokerHeaders(message.properties.headers, [OJS_HEADERS.parkedBy, OJS_HEADERS.parkedReturn]);
      // The operator's own user_id is stamped instead of the parking stage's (the broker checks it).
      const { userId: _parker, ...properties } = message.properties;
      void _parker;
      await publisher.publish(names.retry, delayRoutingKey(0, back), message.content, { ...properties, headers });
      channel.ack(message);
      moved++;
    }
  } finally {
    await publisher.close();
    await channel.close().catch(() => undefined);
  }
  if (moved > 0 || kept > 0) log.info('parked jobs sent on', { moved, kept });
  return { moved, kept };
}

/** Read as a stage reads it (the batch in `meta.batch`, the tenant from its header or body); undefined when it is not a job. */
function decoded(config: CompiledConfig, message: GetMessage): Job | undefined {
  try {
    return fromWire(message, config.tenantHeader).job;
  } catch {
    return undefined;
  }
}

function parkedJob(message: GetMessage, job: Job | undefined): ParkedJob {
  const by: unknown = message.properties.headers?.[OJS_HEADERS.parkedBy];
  const batch: unknown = job?.meta.batch;
  return {
    key: message.fields.routingKey,
    by: typeof by === 'string' ? by : undefined,
    batch: typeof batch === 'string' ? batch : undefined,
  };
}

/**
 * The `due` or `suspect` queue a parked message goes back to, when it is one of the tenant it was
 * parked for (or a shared one for `_`), else why not.
 */
function returnQueueOf(config: CompiledConfig, message: GetMessage, key: string, job: Job | undefined): string | { reason: string } {
  const back: unknown = message.properties.headers?.[OJS_HEADERS.parkedReturn];
  if (typeof back !== 'string') return { reason: `it has no ${OJS_HEADERS.parkedReturn} header` };
  const parsed = parseBrokerName(config.prefix, back);
  if (parsed === undefined || (parsed.kind !== 'due' && parsed.kind !== 'suspect') || parsed.queue === undefined) {
    return { reason: `its return queue "${back}" is not a due or suspect queue under prefix "${config.prefix}"` };
  }
  if (parsed.tenant !== undefined && parsed.tenant !== key) {
    return { reason: `its return queue "${back}" is not of tenant "${key}", whose job it was parked as` };
  }
  // A shared queue's stage trusts the operator's jobs for any tenant they claim: the claim must be
  // the tenant that parked it.
  if (job === undefined) return { reason: 'it is not a job' };
  const claim = job.tenant;
  if (parkKey(claim) !== key) return { reason: `it claims tenant "${claim ?? '(none)'}" but was parked as a job of "${key}"` };
  return back;
}

async function withConnection<T>(
  config: CompiledConfig,
  log: Logger,
  action: (connection: AmqpConnection, flags: BrokerFlags) => Promise<T>,
): Promise<T> {
  const connection = await openConnection(config, log, 'stagecoach-directive');
  try {
    // The park exchange, the parked queue and the tracking stream, on a broker older than them.
    await declareTopology(connection, coreTopology(config), log);
    return await action(connection, new BrokerFlags(connection, config));
  } finally {
    // Its channels, the flags' included, go with it.
    await connection.close().catch(() => undefined);
  }
}

/**
 * One directive, in order: its flag set or cleared (what stages obey), then a `directive` record
 * on the tracking stream (status and history; with the batch's tenant when known), then the
 * control message that makes running stages read the flag again now.
 */
async function direct(
  connection: AmqpConnection,
  config: CompiledConfig,
  flags: BrokerFlags,
  flag: DirectiveFlag,
  on: boolean,
  action: DirectiveRecord['action'],
  target: { batch: string } | { tenant: string },
  tenant?: string,
): Promise<void> {
  await (on ? flags.set(flag) : flags.clear(flag));
  const publisher = await ConfirmPublisher.open(connection);
  try {
    const record = stamp<DirectiveRecord>({ kind: 'directive', action, ...(tenant === undefined ? {} : { tenant }), ...target });
    await publishRecord(publisher, new BrokerNames(config.prefix).tracking, record);
  } finally {
    await publisher.close();
  }
  await publishControl(connection, config, { command: 'directive', ...target });
}

/** The batch directives by name: the command line and the admin API take them from here. */
export const BATCH_DIRECTIVES = { cancel: cancelBatch, pause: pauseBatch, resume: resumeBatch } as const;
/** The tenant directives by name. */
export const TENANT_DIRECTIVES = { pause: pauseTenant, resume: resumeTenant } as const;
