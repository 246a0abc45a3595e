import { InvalidPayloadError, StagecoachError } from '../errors/errors.js';
import { validateRetryPolicy } from '../retry/retry-policy.js';
import { validateRateLimitPolicy } from './rate-limit-policy.js';
import { compileUnique } from './unique-policy.js';
import { parseDuration } from '../util/duration.js';
import { checkTenantSlug, isTenantSlug, notATenantSlug } from '../util/tenant-slug.js';
import { isTimestamp } from '../util/timestamp.js';
import { BATCH_ID_RULE, isBatchId } from '../util/batch-id.js';
import { uuidv7 } from './uuid-v7.js';
import { MAX_JSON_DEPTH, nestedDeeperThan, SHORTSTR_BYTES } from './wire-limits.js';
import type { Job, JobSpec } from './job.types.js';

/** The `specversion` stagecoach writes (ojs-core 5.1). */
export const SPEC_VERSION = '1.0';
/** The versions it reads: the spec's, and the release candidate's that earlier stagecoach versions wrote. */
export const READ_SPEC_VERSIONS: readonly string[] = [SPEC_VERSION, '1.0.0-rc.1'];
export const JOB_CONTENT_TYPE = 'application/openjobspec+json';

export interface JobOrigin {
  queue: string;
  tenant?: string;
  /** The job this one was emitted by: its id becomes `meta.parent_id`. */
  parentId?: string;
  /** The batch the job belongs to (`meta.batch`): its parent's, or the one a producer starts. */
  batch?: string;
}

/**
 * A new envelope (OJS PUSH): id UUIDv7, attempt 1, created now. Every producer's path
 * (`Publisher`, `ctx.emit`, the test harness): the tenant is checked here, once per job.
 * @throws TenantError when `origin.tenant` is not a tenant slug.
 */
export function createJob(spec: JobSpec, origin: JobOrigin): Job {
  if (typeof spec.type !== 'string' || spec.type.length === 0) {
    throw new InvalidPayloadError('a job needs a non-empty string "type"', origin.queue);
  }
  if (spec.args !== undefined && !Array.isArray(spec.args)) {
    throw new InvalidPayloadError(`job "${spec.type}": "args" must be a JSON array`, origin.queue);
  }
  const unsendable = unsendableType(spec.type);
  if (unsendable !== undefined) throw new InvalidPayloadError(unsendable, origin.queue);
  // As on receipt (parseEnvelope): a job this deep could be sent but never retried or dead-lettered.
  if (nestedDeeperThan(spec.args, MAX_JSON_DEPTH - 1) || nestedDeeperThan(spec.meta, MAX_JSON_DEPTH - 1)) {
    throw new InvalidPayloadError(`job "${spec.type}": "args" or "meta" is nested deeper than ${MAX_JSON_DEPTH} levels`, origin.queue);
  }
  validateRetryPolicy(spec.retry, `job "${spec.type}": retry`);
  validateRateLimitPolicy(spec.rate_limit, `job "${spec.type}": rate_limit`);
  const tagProblem = spec.tags === undefined ? undefined : checkTags(spec.tags);
  if (tagProblem !== undefined) throw new InvalidPayloadError(`job "${spec.type}": "tags" ${tagProblem}`, origin.queue);
  // Checked here, not only on receipt: a scheduled_at nobody can read would not be scheduled.
  if (spec.scheduled_at !== undefined && !isTimestamp(spec.scheduled_at)) {
    throw new InvalidPayloadError(
      `job "${spec.type}": "scheduled_at" must be an ISO 8601 timestamp with a time zone, such as "2026-01-01T09:00:00Z"`,
      origin.queue,
    );
  }
  if (spec.expires_at !== undefined && !isTimestamp(spec.expires_at)) {
    throw new InvalidPayloadError(
      `job "${spec.type}": "expires_at" must be an ISO 8601 timestamp with a time zone, such as "2026-01-01T09:00:00Z"`,
      origin.queue,
    );
  }
  const meta = { ...spec.meta };
  if (origin.parentId !== undefined) meta.parent_id = origin.parentId;
  // Set by the origin only (checked by whoever passes it): a job's batch is its parent's.
  if (origin.batch !== undefined) meta.batch = origin.batch;
  const job: Job = {
    specversion: SPEC_VERSION,
    id: uuidv7(),
    type: spec.type,
    queue: origin.queue,
    args: spec.args ?? [],
    meta,
    attempt: 1,
    created_at: new Date().toISOString(),
  };
  if (origin.tenant !== undefined) job.tenant = checkTenantSlug(origin.tenant, 'tenant');
  if (spec.priority !== undefined) job.priority = spec.priority;
  if (spec.timeout !== undefined) job.timeout = spec.timeout;
  if (spec.retry !== undefined) job.retry = spec.retry;
  if (spec.scheduled_at !== undefined) job.scheduled_at = spec.scheduled_at;
  if (spec.enqueue_ttl !== undefined) job.enqueue_ttl = spec.enqueue_ttl;
  if (spec.expires_at !== undefined) job.expires_at = spec.expires_at;
  if (spec.rate_limit !== undefined) job.rate_limit = spec.rate_limit;
  if (spec.tags !== undefined && spec.tags.length > 0) job.tags = [...new Set(spec.tags)];
  if (spec.unique !== undefined) {
    job.unique = spec.unique;
    // Refused here, before any middleware runs: an invalid policy is the producer's mistake (OJS 2.2).
    compileUnique(job);
  }
  return job;
}

/** Most tags one job carries, and the longest tag: they are stored and listed with the job. */
export const MAX_TAGS = 32;
export const MAX_TAG_LENGTH = 128;

/** What is wrong with a job's `tags` (to follow `"tags"` in a message), or undefined. */
export function checkTags(tags: unknown): string | undefined {
  if (!Array.isArray(tags)) return `must be a list of strings, got ${JSON.stringify(tags)?.slice(0, 100) ?? typeof tags}`;
  if (tags.length > MAX_TAGS) return `holds ${tags.length} tags, at most ${MAX_TAGS}`;
  const bad = tags.find((tag) => typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_TAG_LENGTH);
  if (bad !== undefined) return `holds ${JSON.stringify(bad)?.slice(0, 140)}, not a tag (a string of 1 to ${MAX_TAG_LENGTH} characters)`;
  return undefined;
}

/** Why a job type cannot travel as the AMQP `type` property (a short string), or undefined. */
function unsendableType(type: string): string | undefined {
  const bytes = Buffer.byteLength(type);
  return bytes > SHORTSTR_BYTES
    ? `"type" is ${bytes} bytes long; a job type travels as the AMQP "type" property, at most ${SHORTSTR_BYTES} bytes`
    : undefined;
}

/**
 * Checks that a parsed body is an OJS envelope and returns it typed. Only what stagecoach
 * relies on is checked; unknown fields are kept. Everything the stage later acts on is checked
 * here, on receipt, because another producer may not have checked it: a retry policy with a
 * NaN delay would retry at once, for ever; a bad priority, TTL or timestamp would make the
 * retry or dead letter unpublishable.
 * @throws InvalidPayloadError naming the first field that is wrong.
 */
export function parseEnvelope(body: unknown): Job {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidPayloadError('the body is not an OJS envelope (expected a JSON object)');
  }
  const job = body as Record<string, unknown>;
  const expect = (ok: boolean, what: string): void => {
    if (!ok) throw new InvalidPayloadError(`the envelope's ${what}`);
  };
  expect(typeof job.id === 'string' && job.id.length > 0, '"id" must be a non-empty string');
  expect(typeof job.type === 'string' && job.type.length > 0, '"type" must be a non-empty string');
  const unsendable = unsendableType(job.type as string);
  if (unsendable !== undefined) throw new InvalidPayloadError(`the envelope's ${unsendable}`);
  expect(typeof job.queue === 'string' && job.queue.length > 0, '"queue" must be a non-empty string');
  expect(Array.isArray(job.args), '"args" must be a JSON array');
  expect(
    job.meta === undefined || (typeof job.meta === 'object' && job.meta !== null && !Array.isArray(job.meta)),
    '"meta" must be an object',
  );
  // A dotted tenant would make its queue names those of another tenant's variant queues.
  if (job.tenant !== undefined && !isTenantSlug(job.tenant)) {
    throw new InvalidPayloadError(`the envelope's "tenant": ${notATenantSlug(job.tenant)}`);
  }
  // The batch, like the tenant, is carried on into every job this one emits: a malformed one
  // would be reported under a name no batch command can address.
  const meta = job.meta as Record<string, unknown> | undefined;
  if (meta?.batch !== undefined && !isBatchId(meta.batch)) {
    throw new InvalidPayloadError(
      `the envelope's "meta.batch": ${JSON.stringify(meta.batch)?.slice(0, 140)} is not a batch id (${BATCH_ID_RULE})`,
    );
  }
  expect(job.attempt === undefined || (Number.isInteger(job.attempt) && (job.attempt as number) >= 1), '"attempt" must be an integer >= 1');
  expect(
    job.timeout === undefined || (typeof job.timeout === 'number' && job.timeout > 0),
    '"timeout" must be a positive number of seconds',
  );
  // OJS priority is any integer; the AMQP mapping keeps its order on the broker's 0-9 (amqp-priority.ts).
  expect(job.priority === undefined || Number.isInteger(job.priority), '"priority" must be an integer');
  expect(
    job.enqueue_ttl === undefined || (typeof job.enqueue_ttl === 'string' && parseDuration(job.enqueue_ttl) !== undefined),
    '"enqueue_ttl" must be an ISO 8601 duration such as "PT30S"',
  );
  expect(job.scheduled_at === undefined || isTimestamp(job.scheduled_at), '"scheduled_at" must be an ISO 8601 timestamp with a time zone');
  expect(job.expires_at === undefined || isTimestamp(job.expires_at), '"expires_at" must be an ISO 8601 timestamp with a time zone');
  expect(job.created_at === undefined || isTimestamp(job.created_at), '"created_at" must be an ISO 8601 timestamp with a time zone');
  validateRateLimitPolicy(job.rate_limit, `the envelope's "rate_limit"`);
  const tagProblem = job.tags === undefined ? undefined : checkTags(job.tags);
  if (tagProblem !== undefined) throw new InvalidPayloadError(`the envelope's "tags" ${tagProblem}`);
  // Last: the fields above are shallow, and a body this deep could never be published again.
  if (nestedDeeperThan(job, MAX_JSON_DEPTH)) {
    throw new InvalidPayloadError(
      `the envelope is nested deeper than ${MAX_JSON_DEPTH} levels (it could not be published again, not even as a dead letter)`,
    );
  }
  try {
    validateRetryPolicy(job.retry, `the envelope's "retry"`);
  } catch (err) {
    if (err instanceof StagecoachError) throw new InvalidPayloadError(err.message);
    throw err;
  }
  // Completed in place: the parsed body is ours, and a copy per delivery is garbage per job.
  if (typeof job.specversion !== 'string') job.specversion = SPEC_VERSION;
  job.meta ??= {};
  job.attempt ??= 1;
  job.created_at ??= new Date().toISOString();
  return job as unknown as Job;
}
