import { InvalidPayloadError, StagecoachError } from '../../errors/errors.js';
import { parseDuration } from '../../util/duration.js';
import { isQueueName, QUEUE_NAME_RULE } from '../../util/queue-name.js';
import { checkTags, READ_SPEC_VERSIONS } from '../../job/envelope.js';
import { childJobId } from '../../job/child-id.js';
import { isTenantSlug, notATenantSlug } from '../../util/tenant-slug.js';
import type { RetryPolicy } from '../../config/config.types.js';
import type { PublishSpec, UniquePolicy } from '../../job/job.types.js';
import { rateLimitOf } from './rate-limit-input.js';

/** The queue of a job pushed without `options.queue` (OJS core: `default`). */
export const DEFAULT_QUEUE = 'default';

/** OJS job types: dot-separated lowercase segments; hyphens accepted after the first character (the suite's `retry.test.max-attempts`). */
const JOB_TYPE = /^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$/;
/** A lowercase UUIDv7 (OJS job ids). */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** OJS priorities (spec/ojs-core.md): -100 (lowest) to 100; the AMQP mapping clamps them to 0-9. */
const PRIORITY_RANGE = 100;

/** The fields of a push body the binding reads; any other top-level field is an extension, kept. */
const KNOWN = new Set([
  'id',
  'type',
  'args',
  'meta',
  'options',
  'specversion',
  'queue',
  'priority',
  'state',
  'attempt',
  'unique',
  'expires_at',
]);

/** A push request (spec/ojs-http-binding.md section 4.1) read into what the Publisher takes. */
export interface PushInput {
  queue: string;
  spec: PublishSpec;
  /** The client's own id, when it gave one. */
  id?: string;
  /** The OJS priority as given (-100..100): shown as such, mapped onto the broker's 0-9 on the wire (amqp-priority.ts). */
  priority?: number;
  /** `options.visibility_timeout_ms`: the visibility timeout of its claims. */
  visibilityMs?: number;
  /** Top-level fields the binding does not know: kept on the envelope (OJS core: unknown fields are preserved). */
  extensions: Record<string, unknown>;
  /**
   * The id was derived from `meta.parent_id` and `meta.idempotency_key`: a job with that id is
   * this push made before (a parent's run that is run again), answered as such, not refused.
   */
  derived?: boolean;
}

/** The longest `meta.idempotency_key` (as ojs-bulk-operations bounds its keys). */
export const MAX_IDEMPOTENCY_KEY = 256;

/**
 * Reads one push body. @throws InvalidPayloadError naming the first field that is wrong (400
 * `invalid_payload`): the body is not an object, no `type` or one not of the OJS pattern, `args`
 * missing or not an array, an id that is not a lowercase UUIDv7, a queue name or priority out of
 * the spec's range.
 */
export function readPushInput(body: unknown, tenant: string | undefined): PushInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new InvalidPayloadError('the request body must be an OJS job (a JSON object)');
  const job = body as Record<string, unknown>;
  const options = objectField(job.options, 'options');
  if (typeof job.type !== 'string' || !JOB_TYPE.test(job.type)) {
    throw new InvalidPayloadError(
      `"type" must be a job type such as "email.send" (${JOB_TYPE.source}), got ${JSON.stringify(job.type) ?? 'nothing'}`,
    );
  }
  if (!Array.isArray(job.args)) throw new InvalidPayloadError(`"args" must be a JSON array, got ${JSON.stringify(job.args) ?? 'nothing'}`);
  if (job.id !== undefined && (typeof job.id !== 'string' || !UUID_V7.test(job.id))) {
    throw new InvalidPayloadError(`"id" must be a lowercase UUIDv7, got ${JSON.stringify(job.id)}`);
  }
  if (job.specversion !== undefined && !READ_SPEC_VERSIONS.includes(job.specversion as string)) {
    throw new InvalidPayloadError(
      `"specversion" must be one of ${READ_SPEC_VERSIONS.map((v) => `"${v}"`).join(', ')}, got ${JSON.stringify(job.specversion)}`,
    );
  }
  const tags = options.tags;
  const tagProblem = tags === undefined ? undefined : checkTags(tags);
  if (tagProblem !== undefined) throw new InvalidPayloadError(`"options.tags" ${tagProblem}`);
  const queue = options.queue ?? job.queue ?? DEFAULT_QUEUE;
  if (!isQueueName(queue)) {
    throw new InvalidPayloadError(`"options.queue" must be a queue name (${QUEUE_NAME_RULE}), got ${JSON.stringify(queue)?.slice(0, 120)}`);
  }
  const priority = options.priority ?? job.priority;
  if (priority !== undefined && (!Number.isInteger(priority) || Math.abs(priority as number) > PRIORITY_RANGE)) {
    throw new InvalidPayloadError(
      `"options.priority" must be an integer from -${PRIORITY_RANGE} to ${PRIORITY_RANGE}, got ${JSON.stringify(priority)}`,
    );
  }
  const timeoutMs = options.timeout_ms;
  if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !(timeoutMs > 0))) {
    throw new InvalidPayloadError(`"options.timeout_ms" must be a positive number of milliseconds, got ${JSON.stringify(timeoutMs)}`);
  }
  const now = Date.now();
  const scheduledAt = timeOf(options.delay_until ?? options.scheduled_at, 'options.scheduled_at', now);
  const expiresAt = timeOf(options.expires_at ?? job.expires_at, 'options.expires_at', now);
  if (options.pending !== undefined && typeof options.pending !== 'boolean') {
    throw new InvalidPayloadError(`"options.pending" must be a boolean, got ${JSON.stringify(options.pending)?.slice(0, 100)}`);
  }
  const visibilityMs = options.visibility_timeout_ms;
  if (visibilityMs !== undefined && (!Number.isInteger(visibilityMs) || (visibilityMs as number) < 1000)) {
    throw new InvalidPayloadError(
      `"options.visibility_timeout_ms" must be an integer of at least 1000, got ${JSON.stringify(visibilityMs)}`,
    );
  }
  const meta = { ...objectField(job.meta, 'meta') };
  const jobTenant = tenantOfPush(meta, tenant);
  // ojs-multi-tenancy 5.3: the tenant the request acts for is written into the job.
  if (jobTenant !== undefined) meta.tenant_id = jobTenant;
  const childId = derivedId(job, meta, jobTenant);
  const rateLimit = rateLimitOf(options.rate_limit, queue as string, jobTenant);
  const spec: PublishSpec = {
    type: job.type,
    args: job.args,
    meta,
    ...(priority === undefined ? {} : { priority: priority as number }),
    ...(timeoutMs === undefined ? {} : { timeout: Math.ceil((timeoutMs as number) / 1000) }),
    ...(scheduledAt === undefined ? {} : { scheduled_at: scheduledAt }),
    ...(expiresAt === undefined ? {} : { expires_at: expiresAt }),
    ...(options.retry === undefined ? {} : { retry: objectField(options.retry, 'options.retry') as RetryPolicy }),
    // OJS unique jobs: `options.unique` (or a top-level `unique`), checked by createJob.
    ...((options.unique ?? job.unique) === undefined ? {} : { unique: (options.unique ?? job.unique) as UniquePolicy }),
    ...(tags === undefined ? {} : { tags: tags as string[] }),
    ...(rateLimit === undefined ? {} : { rate_limit: rateLimit }),
    ...(options.pending === true ? { pending: true } : {}),
    ...(jobTenant === undefined ? {} : { tenant: jobTenant }),
  };
  const extensions: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(job)) if (!KNOWN.has(key)) extensions[key] = value;
  return {
    queue,
    spec,
    ...(job.id === undefined ? {} : { id: job.id as string }),
    ...(childId === undefined ? {} : { id: childId, derived: true }),
    ...(priority === undefined ? {} : { priority: priority as number }),
    ...(visibilityMs === undefined ? {} : { visibilityMs: visibilityMs as number }),
    extensions,
  };
}

/**
 * The job's tenant (ojs-multi-tenancy 5.1, 5.3): the request's (a tenant token's, or the admin's
 * `X-OJS-Tenant`), else the body's `meta.tenant_id`. Both given and different: 400.
 */
function tenantOfPush(meta: Record<string, unknown>, tenant: string | undefined): string | undefined {
  const named = meta.tenant_id;
  if (named === undefined || named === null) return tenant;
  if (!isTenantSlug(named)) throw new InvalidPayloadError(`"meta.tenant_id": ${notATenantSlug(named)}`);
  if (tenant !== undefined && named !== tenant) {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `"meta.tenant_id" is "${named}" but the request acts for tenant "${tenant}" (its token or X-OJS-Tenant): they must agree`,
    );
  }
  return named;
}

/**
 * The id of a job pushed by a parent's run under `meta.idempotency_key` (childJobId), or undefined
 * without a key. The key needs `meta.parent_id` (it is unique per parent) and excludes an `id`.
 */
function derivedId(job: Record<string, unknown>, meta: Record<string, unknown>, tenant: string | undefined): string | undefined {
  const key = meta.idempotency_key;
  if (key === undefined || key === null) return undefined;
  if (typeof key !== 'string' || key === '' || key.length > MAX_IDEMPOTENCY_KEY) {
    throw new InvalidPayloadError(
      `"meta.idempotency_key" must be a string of 1 to ${MAX_IDEMPOTENCY_KEY} characters, got ${JSON.stringify(key)?.slice(0, 100)}`,
    );
  }
  const parent = meta.parent_id;
  if (typeof parent !== 'string' || parent === '' || parent.length > 255) {
    throw new InvalidPayloadError('"meta.idempotency_key" needs "meta.parent_id", the id of the job whose run pushes this one');
  }
  if (job.id !== undefined) throw new InvalidPayloadError('"id" and "meta.idempotency_key": give one or the other (the key makes the id)');
  return childJobId(parent, key, tenant);
}

function objectField(value: unknown, name: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new InvalidPayloadError(`"${name}" must be a JSON object`);
  return value as Record<string, unknown>;
}

/**
 * A time of a push: an ISO 8601 timestamp, or one relative to now, `+` and an ISO 8601 duration
 * (`+PT5S`, as the conformance suite writes them), made absolute here.
 */
function timeOf(value: unknown, name: string, now: number): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string')
    throw new InvalidPayloadError(`"${name}" must be an ISO 8601 timestamp, or "+" and a duration such as "+PT30S"`);
  // A bare ISO 8601 duration (`PT5M`: no timestamp starts with `P`) is relative too: the JS SDK
  // passes a `delay` it does not recognise on as it is.
  if (!value.startsWith('+') && !value.startsWith('P')) return value;
  const ms = parseDuration(value.startsWith('+') ? value.slice(1) : value);
  if (ms === undefined) throw new InvalidPayloadError(`"${name}": "${value}" is not "+" and an ISO 8601 duration such as "+PT30S"`);
  return new Date(now + ms).toISOString();
}
