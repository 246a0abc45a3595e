import type { CompiledConfig } from '../config/config.types.js';
import { queueFor, variantOf } from '../config/queue-resolver.js';
import { QueueFullError, StagecoachError, TenantMismatchError, TenantRequiredError } from '../errors/errors.js';
import { toWire, type WireMessage, type WireOptions } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
import { identitiesOf } from '../security/broker-users.js';
import { delayRoutingKey, MAX_DELAY_SECONDS } from '../topology/delay-topology.js';
import { brokerNamesOf, type BrokerNames } from '../topology/names.js';
import { matchesAny } from '../util/patterns.js';
import type { PublishChannel } from './confirm-publisher.js';
import { blockTimeoutOf, waitForRoom, type BlockScope, type BlockTimeout } from './overflow-block.js';
import { unavailableQueue } from './refusal-cause.js';
import type { PayloadOffloader } from '../payload/payload-offloader.js';

export interface Route {
  exchange: string;
  routingKey: string;
  /** Whole seconds the job waits on the delay ladder (a future `scheduled_at`); absent when it enters its queue at once. */
  delaySeconds?: number;
}

/** What scheduling needs besides the job: the moment of publishing and the message's headers (they pick a variant). */
export interface ScheduleContext {
  now: number;
  headers: Readonly<Record<string, unknown>>;
}

/**
 * Where a job enters the broker (docs/broker.md): tenant-scoped queues through the root headers
 * exchange with the tenant header, shared queues through `ojs.direct`; the routing key is
 * always the logical queue name.
 *
 * With `security.tenantUsers`, a tenant's producer or stage user may write neither the root
 * exchange (its header routing would let it claim any tenant) nor another tenant's exchange: it
 * publishes tenant-scoped jobs straight to `<prefix>.tenant.<T>`, where the root exchange would
 * have sent them (same queues, same routing by key). A job for another tenant is refused here
 * (TENANT_MISMATCH) rather than by the broker, which would close the channel. Trusted users
 * (operator, internal) keep the root exchange and its `unroutable` for unknown tenants.
 *
 * With `schedule` (producers: `Publisher`, `ctx.emit`), a job whose `scheduled_at` is at least
 * 1 s ahead (see {@link scheduledDelaySeconds}) enters the delay ladder instead, addressed to the
 * `due` companion of the physical queue the entry exchange would have picked: the ladder
 * delivers to `due` queues only (build-topology.ts). That queue is decided here, from the
 * configuration, as the broker would decide it: the shared queue, or the tenant's variant queue
 * whose values hold the job's variant header, else the tenant's general queue. A due queue that
 * does not exist (tenant not provisioned) sends the job to `unroutable` by the delivery
 * exchange's alternate exchange, and `unroutable replay` sends it on by the ladder. Without
 * `schedule` (dead letters, replays) a job enters at once.
 *
 * `ownTenant`: the tenant whose exchange the publisher knows to exist because it declared it
 * (a stage running for that tenant). Its jobs go to that exchange directly; every other tenant's
 * through the root exchange, whose alternate exchange keeps a job for a tenant never provisioned
 * in `unroutable` (a publish to a missing exchange would close the channel instead).
 */
export function routeFor(config: CompiledConfig, job: Job, schedule?: ScheduleContext, ownTenant?: string): Route {
  const names = brokerNamesOf(config);
  const queue = queueFor(config, job.queue);
  if (!typeAllowed(queue.allowed_job_types, job.type)) {
    throw new StagecoachError(
      'JOB_TYPE_NOT_ALLOWED',
      `job type "${job.type}" is not allowed in queue "${job.queue}" (allowed: ${(queue.allowed_job_types ?? []).join(', ')})`,
    );
  }
  const tenantUsers = config.security.tenantUsers;
  if (queue.scope === 'shared') {
    if (tenantUsers) checkOwnTenant(config, job.tenant);
    const delay = delayOf(job, schedule);
    if (delay !== undefined) return delayed(names, names.dueQueue(job.queue), delay);
    return { exchange: names.direct, routingKey: job.queue };
  }
  if (job.tenant === undefined) throw new TenantRequiredError(job.queue);
  const trusted = !tenantUsers || checkOwnTenant(config, job.tenant);
  const delay = delayOf(job, schedule);
  if (delay !== undefined && schedule !== undefined) {
    return delayed(names, names.dueQueue(job.queue, job.tenant, variantOf(queue, schedule.headers)), delay);
  }
  // The publisher's own tenant, whose exchange it declared, skips the root headers exchange: the
  // broker's costliest hop, and a lookup the tenant exchange would repeat (same queue, same key).
  if (!trusted || job.tenant === ownTenant) return { exchange: names.tenantExchange(job.tenant), routingKey: job.queue };
  return { exchange: names.root, routingKey: job.queue };
}

/**
 * How long a job scheduled for `scheduled_at` waits on the delay ladder when it is published at
 * `now`: whole seconds, rounded as the ladder rounds (so it is delivered within half a second of
 * its time, plus the broker's latency), or undefined when it is due: in the past, or less than
 * half a second ahead. A time beyond the ladder's longest delay (MAX_DELAY_SECONDS, about 12
 * days) waits that long, and then hops on: the stage consuming the due queue sends a job still
 * more than SCHEDULE_HOP_SLACK_MS ahead back onto the ladder for what is left (docs/scheduling.md).
 * @throws StagecoachError `INVALID_REQUEST` for a `scheduled_at` that is not a timestamp.
 */
export function scheduledDelaySeconds(job: Pick<Job, 'type' | 'scheduled_at'>, now: number): number | undefined {
  if (job.scheduled_at === undefined) return undefined;
  const at = Date.parse(job.scheduled_at);
  if (!Number.isFinite(at)) {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `job "${job.type}": scheduled_at must be an ISO 8601 timestamp, got "${job.scheduled_at}"`,
    );
  }
  const seconds = Math.round((at - now) / 1000);
  if (seconds < 1) return undefined;
  return Math.min(seconds, MAX_DELAY_SECONDS);
}

/**
 * How early a job may come out of the ladder into its due queue before the stage sends it back
 * for the rest of its wait: far more than the ladder's rounding (half a second) and the clock
 * skew between hosts, so that only a job scheduled beyond the ladder's reach ever hops.
 */
export const SCHEDULE_HOP_SLACK_MS = 60_000;

/** Milliseconds a job taken from a due queue at `now` still has to wait (it hops on), or undefined: it runs. */
export function scheduleHopMs(job: Pick<Job, 'scheduled_at'>, now: number): number | undefined {
  if (job.scheduled_at === undefined) return undefined;
  const left = Date.parse(job.scheduled_at) - now;
  return Number.isFinite(left) && left > SCHEDULE_HOP_SLACK_MS ? left : undefined;
}

function delayOf(job: Job, schedule: ScheduleContext | undefined): number | undefined {
  return schedule === undefined || job.scheduled_at === undefined ? undefined : scheduledDelaySeconds(job, schedule.now);
}

function delayed(names: BrokerNames, dueQueue: string, seconds: number): Route {
  return { exchange: names.retry, routingKey: delayRoutingKey(seconds * 1000, dueQueue), delaySeconds: seconds };
}

/**
 * A tenant user publishes for its own tenant only (a tenantless job included: its tenant would
 * be anyone's). @returns whether the publishing user is trusted (operator or internal).
 */
function checkOwnTenant(config: CompiledConfig, tenant: string | undefined): boolean {
  const identities = identitiesOf(config);
  if (identities.selfTrusted) return true;
  if (identities.selfTenant !== undefined && identities.selfTenant !== tenant) {
    throw new TenantMismatchError(
      tenant,
      identities.self,
      `broker user "${identities.self}" publishes for tenant "${identities.selfTenant}" only, not for ${tenant === undefined ? 'a job without a tenant' : `"${tenant}"`}`,
    );
  }
  return false;
}

/** OJS `allowed_job_types`: exact types, `*`, and `prefix.*` wildcards. */
export function typeAllowed(patterns: readonly string[] | undefined, type: string): boolean {
  return patterns === undefined || matchesAny(patterns, type);
}

/** Where emitted jobs go: the broker in production, a list in the in-memory harness. */
export interface JobSink {
  /**
   * @param scope read while a full `block` queue makes the send wait: it stops waiting once abandoned.
   * @param lost aborted when the emitting delivery is lost: a send still waiting (for its
   *   payload to be stored, for a publisher channel to heal or drain) is then dropped, rejected
   *   with the signal's reason, never published.
   * @param sent called once the job is handed to the broker's channel, before its confirm
   *   (PublishChannel.publish); a sink without a broker may call it at once or never.
   */
  send(job: Job, wire?: Omit<WireOptions, 'tenantHeader'>, scope?: BlockScope, lost?: AbortSignal, sent?: () => void): Promise<void>;
}

/**
 * Publishes envelopes to their route and resolves when the broker confirmed them. With a
 * {@link PayloadOffloader}, a job above its queue's `payload_threshold` travels by reference.
 * A job a full queue refuses rejects with QUEUE_FULL at once, unless the queue's
 * `overflow_policy` is `block`: then the same message is tried again until the broker takes it,
 * up to `block_timeout` (broker/overflow-block.ts). Scheduled jobs enter the delay ladder, which
 * is unbounded: they never wait.
 */
export class JobRouter implements JobSink {
  /**
   * @param ownTenant the tenant whose exchange this publisher declared (see {@link routeFor}): a
   *   stage running for one tenant.
   */
  constructor(
    private readonly config: CompiledConfig,
    private readonly publisher: PublishChannel,
    private readonly payloads?: PayloadOffloader,
    private readonly ownTenant?: string,
  ) {}

  /**
   * Not async on purpose: one promise per job on the hot path, the publisher's. A job scheduled
   * ahead goes by the delay ladder (see `routeFor`).
   */
  send(job: Job, wire: Omit<WireOptions, 'tenantHeader'> = {}, scope?: BlockScope, lost?: AbortSignal, sent?: () => void): Promise<void> {
    try {
      const message = toWire(job, { ...wire, tenantHeader: this.config.tenantHeader });
      if (this.payloads?.exceeds(job.queue, message.content.length) === true) {
        return this.payloads.send(job, { ...wire, tenantHeader: this.config.tenantHeader }, (slim) =>
          this.publishRouted(job, slim, scope, lost, sent),
        );
      }
      return this.publishRouted(job, message, scope, lost, sent);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  private publishRouted(
    job: Job,
    message: WireMessage,
    scope: BlockScope | undefined,
    lost: AbortSignal | undefined,
    sent: (() => void) | undefined,
  ): Promise<void> {
    if (lost?.aborted === true) return Promise.reject(lost.reason as Error);
    const route = routeFor(this.config, job, { now: Date.now(), headers: message.options.headers ?? {} }, this.ownTenant);
    // A per-message TTL would expire the job inside a delay queue and cut its wait short (the
    // broker drops `expiration` when it dead-letters it on): a scheduled job's enqueue_ttl is
    // not applied.
    if (route.delaySeconds !== undefined) delete message.options.expiration;
    // Known per queue and tenant after the first job: the common case stays one promise per job.
    const timeout = route.delaySeconds === undefined ? blockTimeoutOf(this.config, job.queue, job.tenant) : undefined;
    const publish = (): Promise<void> =>
      this.publisher.publish(route.exchange, route.routingKey, message.content, message.options, lost, sent);
    // A classic queue's refusal stands as it is (only a quorum queue has a leader to lose), so
    // only a `block` or a quorum queue pays for a handler of it.
    if (timeout === undefined && queueFor(this.config, job.queue).type !== 'quorum') return publish();
    return publish().catch((err: unknown) => this.refused(err, publish, timeout, scope, lost));
  }

  /**
   * A publish that failed: a refusal is checked before it is believed (a queue without a leader
   * refuses too: broker/refusal-cause.ts), then a full `block` queue is waited for.
   */
  private async refused(
    err: unknown,
    publish: () => Promise<void>,
    timeout: BlockTimeout | undefined,
    scope: BlockScope | undefined,
    lost: AbortSignal | undefined,
  ): Promise<void> {
    if (!(err instanceof QueueFullError) || lost?.aborted === true) throw err;
    const unavailable = await unavailableQueue(this.config, err, this.publisher.readyMessages?.bind(this.publisher));
    if (unavailable !== undefined) throw unavailable;
    if (timeout === undefined) throw err;
    return waitForRoom(err, publish, timeout, scope);
  }
}
