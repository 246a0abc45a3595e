import type { Options } from 'amqplib';
import { parseDuration } from '../util/duration.js';
import { InvalidPayloadError } from '../errors/errors.js';
import { isTenantSlug, notATenantSlug } from '../util/tenant-slug.js';
import { isBatchId } from '../util/batch-id.js';
import { amqpPriority } from './amqp-priority.js';
import { JOB_CONTENT_TYPE, parseEnvelope } from './envelope.js';
import type { HeaderValue, Job } from './job.types.js';
import { headerBytes, MAX_INCOMING_HEADER_BYTES } from './wire-limits.js';

/** The `x-ojs-*` headers of the OJS AMQP binding, and the ones stagecoach adds for dead letters. */
export const OJS_HEADERS = {
  tenant: 'x-ojs-tenant',
  queue: 'x-ojs-queue',
  attempt: 'x-ojs-attempt',
  scheduledAt: 'x-ojs-scheduled-at',
  traceparent: 'x-ojs-traceparent',
  /** The job's batch (`meta.batch`), for consumers that read headers only (docs/batches.md). */
  batch: 'x-ojs-batch',
  errorType: 'x-ojs-error-type',
  errorMessage: 'x-ojs-error-message',
  /** Where a dead letter physically came from: the queue, its tenant and variant (not the job's claim). */
  originQueue: 'x-ojs-origin-queue',
  originTenant: 'x-ojs-origin-tenant',
  originVariant: 'x-ojs-origin-variant',
  /** On a parked job (docs/batches.md): what parked it (`batch` or `tenant`) and the queue `resume` sends it back to. */
  parkedBy: 'x-ojs-parked-by',
  parkedReturn: 'x-ojs-parked-return',
  /** A job whose `args` travel by reference (docs/payloads.md): `<tenant>/<id>` in the payload store, and their size in bytes. */
  payloadRef: 'x-ojs-payload-ref',
  payloadSize: 'x-ojs-payload-size',
  /** The job's own `rate_limit` policy, JSON (docs/flow-control.md): a stage reads it before decoding the body. */
  rateLimit: 'x-ojs-rate-limit',
  /** On a dead letter whose delivery's headers did not fit (see dead-letter-bounds.ts): the names of those left out. */
  droppedHeaders: 'x-ojs-dropped-headers',
} as const;

/** Headers the broker adds on dead-lettering and redelivery: a republished job starts without them. */
/** The `x-ojs-parked-by` of a job held pending (OJS `pending`; publisher/pending-hold.ts), beside the pauses' `batch` and `tenant`. */
export const PENDING_PARK = 'pending';

const BROKER_HEADERS = [
  'x-death',
  'x-first-death-exchange',
  'x-first-death-queue',
  'x-first-death-reason',
  'x-last-death-exchange',
  'x-last-death-queue',
  'x-last-death-reason',
  'x-delivery-count',
];

/** A copy of a delivery's headers without the broker's own, for publishing the job again. */
export function withoutBrokerHeaders(
  headers: Record<string, unknown> | undefined,
  drop: readonly string[] = [],
): Record<string, HeaderValue> {
  const copy = { ...headers } as Record<string, HeaderValue>;
  for (const name of BROKER_HEADERS) delete copy[name];
  for (const name of drop) delete copy[name];
  return copy;
}

export interface WireOptions {
  /** Header the root exchange routes by; set besides `x-ojs-tenant` when it differs. */
  tenantHeader: string;
  traceparent?: string;
  /** Extra headers (variant headers and the like). They never override the `x-ojs-*` ones. */
  headers?: Record<string, HeaderValue>;
}

export interface WireMessage {
  content: Buffer;
  options: Options.Publish;
}

/** Envelope -> AMQP body, properties and headers (OJS AMQP binding "Message Properties"). */
export function toWire(job: Job, wire: WireOptions): WireMessage {
  const headers: Record<string, HeaderValue> = { ...wire.headers };
  headers[OJS_HEADERS.queue] = job.queue;
  headers[OJS_HEADERS.attempt] = job.attempt;
  if (job.tenant !== undefined) {
    headers[OJS_HEADERS.tenant] = job.tenant;
    headers[wire.tenantHeader] = job.tenant;
  }
  if (job.scheduled_at !== undefined) headers[OJS_HEADERS.scheduledAt] = job.scheduled_at;
  if (wire.traceparent !== undefined) headers[OJS_HEADERS.traceparent] = wire.traceparent;
  const batch = job.meta.batch;
  if (typeof batch === 'string') headers[OJS_HEADERS.batch] = batch;
  if (job.rate_limit !== undefined) headers[OJS_HEADERS.rateLimit] = JSON.stringify(job.rate_limit);
  if (job.error !== undefined) {
    headers[OJS_HEADERS.errorType] = job.error.type;
    headers[OJS_HEADERS.errorMessage] = job.error.message;
  }

  const options: Options.Publish = {
    messageId: job.id,
    type: job.type,
    contentType: JOB_CONTENT_TYPE,
    persistent: true,
    timestamp: Math.floor(Date.parse(job.created_at) / 1000),
    // Order-preserving onto the broker's levels (amqp-priority.ts): -10, 0 and 10 stay apart. Set
    // on every job: one without a priority is 0, above the negative ones, not the broker's lowest.
    priority: amqpPriority(job.priority),
    headers,
  };
  if (job.enqueue_ttl !== undefined) {
    const ttl = parseDuration(job.enqueue_ttl);
    if (ttl === undefined) throw new InvalidPayloadError(`"enqueue_ttl" must be an ISO 8601 duration, got "${job.enqueue_ttl}"`, job.queue);
    options.expiration = String(ttl);
  }
  return { content: Buffer.from(JSON.stringify(job)), options };
}

export interface IncomingMessage {
  content: Buffer;
  properties: { headers?: Record<string, unknown> | undefined; contentType?: string | undefined };
}

export interface DecodedJob {
  job: Job;
  headers: Record<string, unknown>;
}

/**
 * AMQP message -> envelope. The `x-ojs-attempt` header wins over the body's `attempt`: retries
 * stamp the header. A body without `tenant` takes it from the routing header. The body is
 * parsed once, here. Every tenant the message carries (the routing header, `x-ojs-tenant`, the
 * body's `tenant`) must be a slug, whichever of them the job ends up with.
 * @throws InvalidPayloadError with the reason when the body is not a job.
 */
export function fromWire(message: IncomingMessage, tenantHeader: string = OJS_HEADERS.tenant): DecodedJob {
  const headers = message.properties.headers ?? {};
  const size = headerBytes(headers);
  if (size > MAX_INCOMING_HEADER_BYTES) {
    throw new InvalidPayloadError(
      `the headers take ${size} bytes, more than the ${MAX_INCOMING_HEADER_BYTES} a message stagecoach publishes again (a retry, a dead letter) can carry`,
    );
  }
  const contentType = message.properties.contentType;
  if (contentType !== undefined && contentType !== JOB_CONTENT_TYPE && contentType !== 'application/json') {
    throw new InvalidPayloadError(`content type "${contentType}" is not ${JOB_CONTENT_TYPE}`);
  }
  let body: unknown;
  try {
    body = JSON.parse(message.content.toString('utf8'));
  } catch (err) {
    throw new InvalidPayloadError(`the body is not JSON (${(err as Error).message})`);
  }
  const job = parseEnvelope(body);
  checkTenantHeader(headers, tenantHeader);
  if (tenantHeader !== OJS_HEADERS.tenant) checkTenantHeader(headers, OJS_HEADERS.tenant);
  const attempt = Number(headers[OJS_HEADERS.attempt]);
  if (Number.isInteger(attempt) && attempt >= 1) job.attempt = attempt;
  if (job.tenant === undefined) {
    // A foreign producer may put the tenant only in the header the root exchange routes by.
    const tenant = headers[tenantHeader] ?? headers[OJS_HEADERS.tenant];
    if (typeof tenant === 'string') job.tenant = tenant;
  }
  // Likewise the batch: a foreign producer may set the header only. The body wins when both are set.
  const batch = headers[OJS_HEADERS.batch];
  if (batch !== undefined && job.meta.batch === undefined) {
    if (!isBatchId(batch))
      throw new InvalidPayloadError(`header "${OJS_HEADERS.batch}": ${JSON.stringify(batch)?.slice(0, 140)} is not a batch id`);
    job.meta.batch = batch;
  }
  return { job, headers };
}

/** A tenant header, where present, is a slug: the broker routed by it, a foreign producer set it. */
function checkTenantHeader(headers: Record<string, unknown>, name: string): void {
  const value = headers[name];
  if (value !== undefined && value !== null && !isTenantSlug(value)) {
    throw new InvalidPayloadError(`header "${name}": ${notATenantSlug(value)}`);
  }
}
