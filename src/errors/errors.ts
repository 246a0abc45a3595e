/**
 * One base class, {@link StagecoachError}, with a machine-readable `code` taken from the OJS
 * error codes where one fits. Subclasses carry the fields an operator needs to act
 * (file and key, tenant, queue, stage) so that log lines and CLI messages can name them.
 */

export type ErrorCode =
  | 'INVALID_CONFIG'
  | 'INVALID_PAYLOAD'
  | 'INVALID_REQUEST'
  | 'INVALID_RETRY_POLICY'
  | 'NOT_FOUND'
  | 'QUEUE_FULL'
  | 'JOB_TYPE_NOT_ALLOWED'
  | 'TENANT_REQUIRED'
  | 'UNKNOWN_OUTPUT'
  | 'STAGE_NOT_FOUND'
  | 'PUBLISH_FAILED'
  | 'CONNECTION_FAILED'
  | 'HANDLER_ERROR'
  | 'HANDLER_TIMEOUT'
  | 'POISON'
  // An attempt ran past the broker's consumer_timeout: the broker closed its channel and took the
  // job back. Dead-lettered, never run again (it would time out again).
  | 'CONSUMER_TIMEOUT'
  | 'NON_RETRYABLE'
  | 'TOPOLOGY_CONFLICT'
  // With `security.tenantUsers`: a job whose broker-validated publisher (`user_id`) may not act
  // for its tenant. Never retried, never run.
  | 'TENANT_MISMATCH'
  // The RabbitMQ management HTTP API refused or failed a call (users, permissions).
  | 'MANAGEMENT_FAILED'
  // The broker state forbids the operation now (OJS queue configuration 5.3 "409 Conflict"): a
  // queue to remove still has consumers, or holds jobs under the reject strategy.
  | 'CONFLICT'
  // A change through the admin API without the right bearer token (or with none configured).
  | 'UNAUTHORIZED'
  // Dead letters the broker made itself (see dead-letters/broker-death.ts); QUEUE_FULL is its overflow.
  | 'EXPIRED'
  | 'REJECTED'
  | 'DELIVERY_LIMIT'
  | 'BROKER_DEAD_LETTER'
  // A job sent by reference (`x-ojs-payload-ref`) whose payload is no longer in the store (CAF's
  // missing payload): dead-lettered, never retried.
  | 'PAYLOAD_MISSING'
  // A handler met a downstream limit (an HTTP 429): the job waits, no attempt counted, and its
  // limits hold every job of their keys until then (OJS rate-limiting extension 9.1).
  | 'RATE_LIMITED'
  // The channel (or connection) that carried a delivery died while its handler ran: the broker
  // delivers the job again, so this run is void (ctx.signal's reason; see DeliveryLostError).
  | 'DELIVERY_LOST'
  // A job pushed with the id of a job that exists, or refused by its `unique` policy because a
  // job with the same uniqueness key is held (OJS HTTP binding and unique jobs: 409 `duplicate`).
  | 'DUPLICATE'
  // A tenant asked for more than the server holds for one tenant (OJS multi-tenancy: 429).
  | 'TENANT_LIMIT_EXCEEDED'
  // A job no queue took: it was kept in `<prefix>.unroutable` (a tenant never provisioned, a
  // queue no stage or provision declared, a draining queue; see UnroutableJobError).
  | 'UNROUTABLE'
  // An OJS endpoint or option of a conformance level (or an extension) this server does not
  // serve (the HTTP binding's 422 `unsupported`).
  | 'UNSUPPORTED';

export class StagecoachError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A configuration file or value that does not match the schema or its rules. Exit code 2. */
export class ConfigError extends StagecoachError {
  constructor(
    readonly file: string,
    readonly key: string,
    readonly expected: string,
  ) {
    super('INVALID_CONFIG', `${file}: ${key || '(root)'}: ${expected}`);
  }
}

/** A message that is not a job this stage can take: not JSON, not an envelope, wrong type. */
export class InvalidPayloadError extends StagecoachError {
  constructor(
    readonly reason: string,
    readonly queue?: string,
  ) {
    super('INVALID_PAYLOAD', reason);
  }
}

/** A job's arguments travelled by reference and the payload store has nothing under it (docs/payloads.md). */
export class PayloadMissingError extends StagecoachError {
  constructor(
    readonly ref: string,
    readonly tenant?: string,
    readonly queue?: string,
  ) {
    super('PAYLOAD_MISSING', `the payload of this job (${ref}) is not in the payload store: deleted, swept or never stored`);
  }
}

/** A job addressed to a tenant-scoped queue without a tenant. */
export class TenantRequiredError extends StagecoachError {
  constructor(readonly queue: string) {
    super('TENANT_REQUIRED', `queue "${queue}" is tenant-scoped: a tenant is required`);
  }
}

/**
 * A tenant that may not be used: not a slug (`^[a-z0-9][a-z0-9_-]{0,62}$`, see util/tenant-slug.ts),
 * or, for `stagecoach run`, neither configured nor provisioned on the broker. Bad usage: exit code 2.
 */
export class TenantError extends StagecoachError {
  constructor(
    readonly tenant: string,
    message: string,
  ) {
    super('INVALID_REQUEST', message);
  }
}

/**
 * With `security.tenantUsers`: a job for `tenant` published (or about to be published) by a
 * broker user that may not act for that tenant. `publisher` is the AMQP `user_id` the broker
 * validated, undefined when the message had none.
 */
export class TenantMismatchError extends StagecoachError {
  constructor(
    readonly tenant: string | undefined,
    readonly publisher: string | undefined,
    detail: string,
  ) {
    super('TENANT_MISMATCH', detail);
  }
}

/** `ctx.emit()` to an output that the stage decorator does not name. */
export class UnknownOutputError extends StagecoachError {
  constructor(
    readonly stage: string,
    readonly output: string,
    readonly outputs: readonly string[],
  ) {
    super('UNKNOWN_OUTPUT', `stage "${stage}" emitted to "${output}", which is not one of its outputs (${outputs.join(', ') || 'none'})`);
  }
}

/**
 * A job enqueue middleware refused (docs/middleware.md): nothing was published. Stagecoach throws
 * it for a middleware that returned without calling `next()` or changed what it may not (`id`,
 * `queue`, `tenant`, `meta.batch`); a middleware may throw it itself to refuse with its reason.
 */
export class EnqueueRefusedError extends StagecoachError {
  constructor(
    message: string,
    readonly queue?: string,
    readonly jobId?: string,
  ) {
    super('INVALID_REQUEST', message);
  }
}

/** A stage name with no configuration, or a module with no matching `@Stage` class. */
export class StageNotFoundError extends StagecoachError {
  constructor(
    readonly stage: string,
    detail: string,
  ) {
    super('STAGE_NOT_FOUND', `stage "${stage}": ${detail}`);
  }
}

/** The broker refused a publish (nack, closed channel); a full queue is the {@link QueueFullError} kind. */
export class PublishError extends StagecoachError {
  constructor(
    message: string,
    readonly exchange: string,
    readonly routingKey: string,
    /** True when the channel was lost, not the message refused: trying again may work. */
    readonly transient = false,
    options?: { cause?: unknown; code?: 'PUBLISH_FAILED' | 'QUEUE_FULL' },
  ) {
    super(options?.code ?? 'PUBLISH_FAILED', message, options);
  }
}

/** What a {@link QueueFullError} knows of the job it refused; the publisher fills what it can. */
export interface RefusedJob {
  /** The logical queue (`x-ojs-queue` of the job). */
  queue?: string;
  /** The job's tenant (`x-ojs-tenant`), absent for a job without one. */
  tenant?: string;
  /** The headers the job was published with: they pick the variant queue (see `refusedQueue`). */
  headers?: Readonly<Record<string, unknown>>;
}

/** How long a producer waited for room in a full `block` queue before it gave up (see broker/overflow-block.ts). */
export interface BlockedWait {
  /** The queue's `block_timeout`, as configured. */
  timeout: string;
  waitedMs: number;
  /** Publishes the broker refused, the first included. */
  tries: number;
  /** The sender stopped waiting before the timeout (its job's handler failed or timed out). */
  abandoned?: boolean;
}

/**
 * OJS `QUEUE_FULL`: the broker refused a job because a queue it routes to is at its `max_size`
 * (`overflow_policy` `reject` or `block`, a RabbitMQ `reject-publish` policy: the broker nacks
 * the publish); with `block`, once the producer waited `block_timeout` for room (`blocked`).
 * Never transient: the same job is refused again until the queue has room. A subclass of
 * {@link PublishError}, so that code which handles a refused publish keeps doing so.
 */
export class QueueFullError extends PublishError {
  readonly queue: string | undefined;
  readonly tenant: string | undefined;
  readonly headers: Readonly<Record<string, unknown>>;
  /** With `block`: how long the producer waited for room. */
  readonly blocked: BlockedWait | undefined;

  constructor(exchange: string, routingKey: string, job: RefusedJob = {}, options?: { cause?: unknown; blocked?: BlockedWait }) {
    const what = job.queue === undefined ? `"${exchange}" (${routingKey})` : `queue "${job.queue}"`;
    const whose = job.tenant === undefined ? '' : ` of tenant "${job.tenant}"`;
    const blocked = options?.blocked;
    super(
      blocked === undefined
        ? `${what}${whose} is full (QUEUE_FULL: max_size reached, overflow_policy reject): the broker refused the job, nothing was enqueued`
        : `${what}${whose} is full (QUEUE_FULL: max_size reached, overflow_policy block): ${blockedReason(blocked)}, nothing was enqueued`,
      exchange,
      routingKey,
      false,
      { ...(options?.cause === undefined ? {} : { cause: options.cause }), code: 'QUEUE_FULL' },
    );
    this.queue = job.queue;
    this.tenant = job.tenant;
    this.headers = job.headers ?? {};
    this.blocked = blocked;
  }
}

/**
 * The broker refused a publish (nacked it) into a queue that was not full: a quorum queue
 * without a leader while its cluster fails over, the one other refusal RabbitMQ makes. Transient:
 * nothing was enqueued, and the same message is taken once the queue has a leader again, so the
 * emitting job is handed back without spending an attempt (see broker/refusal-cause.ts).
 */
export class QueueUnavailableError extends PublishError {
  constructor(
    exchange: string,
    routingKey: string,
    /** The physical queue that refused the message. */
    readonly queue: string,
    /** Why it was not full: "it has no max_size", "it holds 12 of its max_size 100000 ready messages"... */
    readonly notFull: string,
    readonly tenant?: string,
  ) {
    const whose = tenant === undefined ? '' : ` of tenant "${tenant}"`;
    super(
      `queue "${queue}"${whose} refused the job without being full (${notFull}): a quorum queue without a leader, as during a failover; nothing was enqueued, try again`,
      exchange,
      routingKey,
      true,
    );
  }
}

function blockedReason(blocked: BlockedWait): string {
  const waited = `waited ${(blocked.waitedMs / 1000).toFixed(1)} s, ${blocked.tries} ${blocked.tries === 1 ? 'try' : 'tries'}`;
  if (blocked.abandoned === true) return `its sender stopped waiting for room (${waited}; its job's handler had ended)`;
  return `no room within block_timeout ${blocked.timeout} (${waited})`;
}

/**
 * Thrown by a handler to send a job straight to its dead letters, skipping retries.
 * `type` becomes the dead letter's error type.
 */
export class NonRetryableError extends StagecoachError {
  constructor(
    message: string,
    readonly type = 'NonRetryableError',
  ) {
    super('NON_RETRYABLE', message);
  }
}

/**
 * Thrown by a handler whose downstream answered "too many requests" (OJS rate-limiting extension
 * 9.1, `rate_limit_until`; docs/flow-control.md "Dynamic limits"). Not a failure: the job goes
 * back to the broker until `until`, no attempt counted, and no job of the same limits starts
 * before then in any process. `key` names the limit meant (a key of `limits`, or of the job's
 * own `rate_limit`); without it, every limit the job holds except its queue's.
 */
export class RateLimitedError extends StagecoachError {
  constructor(
    readonly until: Date,
    message = 'rate limited downstream',
    readonly key?: string,
  ) {
    super('RATE_LIMITED', `${message} (until ${until.toISOString()})`);
  }
}

/**
 * Thrown by a handler whose job was cancelled while it ran (a remote worker's claim cancelled with
 * `DELETE /ojs/v1/jobs/{id}`): the job is settled `cancelled`, not failed, and nothing it emitted
 * is sent.
 */
export class JobCancelledError extends StagecoachError {
  constructor(jobId: string) {
    super('INVALID_REQUEST', `job "${jobId}" was cancelled while it ran`);
  }
}

/**
 * A job claimed by a remote worker (OJS HTTP binding) whose visibility timeout ran out without an
 * ack, nack or heartbeat: handed back for another worker as a rate-limited job is, same attempt,
 * no failure counted and not a crash (docs/http-binding.md).
 */
export class VisibilityExpiredError extends RateLimitedError {
  constructor(jobId: string, timeoutMs: number) {
    super(new Date(), `job "${jobId}" was not acknowledged within its visibility timeout of ${timeoutMs} ms`);
  }
}

/** A remote worker handed its job back (a nack with `requeue: true`): at once, same attempt, not a failure. */
export class JobRequeuedError extends RateLimitedError {
  constructor(jobId: string) {
    super(new Date(), `job "${jobId}" was handed back by its worker (nack with requeue)`);
  }
}

/**
 * The reason `ctx.signal` is aborted when the channel or connection that carried a delivery dies
 * while its handler runs: the broker has taken the job back and delivers it again (to this
 * process or another), so this run is void. Emits after it are refused with this error, and
 * nothing is settled for the delivery: its settlement could not reach the broker.
 */
export class DeliveryLostError extends StagecoachError {
  constructor() {
    super('DELIVERY_LOST', 'the channel that carried this delivery closed: the broker delivers the job again, and this run is void');
  }
}

/**
 * A job refused by its `unique` policy (`on_conflict` `reject`, or `replace` meeting an active
 * job): a job with the same uniqueness key is held (docs/unique-jobs.md). Nothing was published.
 * `details` is the OJS error's (`existing_job_id`, `existing_job_state`, `uniqueness_key`).
 */
export class DuplicateJobError extends StagecoachError {
  readonly details: { existing_job_id: string; existing_job_state: string; uniqueness_key: string };

  constructor(
    readonly queue: string,
    readonly jobType: string,
    existing: { id: string; state: string },
    key: string,
    reason = 'a job matching its uniqueness key exists',
  ) {
    super('DUPLICATE', `job "${jobType}" for queue "${queue}" not enqueued: ${reason} (job ${existing.id}, ${existing.state})`);
    this.details = { existing_job_id: existing.id, existing_job_state: existing.state, uniqueness_key: key };
  }
}

/** Why no queue took a job (UnroutableJobError). */
export type UnroutableReason = 'tenant-not-provisioned' | 'queue-not-declared' | 'queue-draining';

/**
 * The broker confirmed a job that no queue took: it is kept in `<prefix>.unroutable` (never
 * dropped; `stagecoach unroutable replay` sends it on once its route exists), and the producer is
 * told, since nothing will run it until then.
 */
export class UnroutableJobError extends StagecoachError {
  constructor(
    readonly jobId: string,
    readonly queue: string,
    readonly tenant: string | undefined,
    readonly reason: UnroutableReason,
  ) {
    const whose = tenant === undefined ? `queue "${queue}"` : `queue "${queue}" of tenant "${tenant}"`;
    const why: Record<UnroutableReason, string> = {
      'tenant-not-provisioned': `tenant "${tenant}" is not provisioned (run \`stagecoach provision --tenant ${tenant}\`)`,
      'queue-not-declared': `${whose} does not exist: no stage declared it and \`stagecoach provision\` has not run for it`,
      'queue-draining': `${whose} is draining and takes no new jobs (\`stagecoach resume ${queue}\` opens it again)`,
    };
    super('UNROUTABLE', `job ${jobId} was taken by no queue and is kept in the unroutable queue: ${why[reason]}`);
  }
}
