import { createHash } from 'node:crypto';
import { StagecoachError } from '../errors/errors.js';
import { parseDuration } from '../util/duration.js';
import type { Job, UniqueConflict, UniqueState } from './job.types.js';
import { JOB_STATES } from './job-states.js';

/*
 * The OJS unique-jobs extension (openjobspec/spec `spec/ojs-unique-jobs.md`; docs/unique-jobs.md):
 * the policy a job may carry, checked at enqueue, and the uniqueness key computed from it.
 */

/** A policy checked, with its defaults and the key it gives the job. */
export interface CompiledUnique {
  /** Lowercase hex SHA-256 of the canonical dimensions. */
  key: string;
  /** Milliseconds, or undefined: the claim holds while the first job is in `states`. */
  periodMs: number | undefined;
  states: readonly UniqueState[];
  onConflict: UniqueConflict;
}

const DIMENSIONS: ReadonlySet<string> = new Set(['type', 'queue', 'args', 'meta']);
const CONFLICTS: ReadonlySet<string> = new Set(['reject', 'replace', 'replace_except_schedule', 'ignore']);
const STATES: ReadonlySet<string> = new Set(JOB_STATES);
const FIELDS: ReadonlySet<string> = new Set(['keys', 'key', 'args_keys', 'meta_keys', 'period', 'states', 'on_conflict']);
export const DEFAULT_UNIQUE_STATES: readonly UniqueState[] = ['available', 'active', 'scheduled', 'retryable', 'pending'];

/**
 * Checks a job's `unique` against the job it rides on and computes its key (OJS section 4).
 * Invalid policies are refused (OJS 2.2: `invalid_request`), never ignored: a typo must not turn
 * deduplication off silently.
 * @throws StagecoachError INVALID_REQUEST naming the field that is wrong.
 */
export function compileUnique(job: Pick<Job, 'type' | 'queue' | 'tenant' | 'args' | 'meta' | 'unique'>): CompiledUnique {
  const where = `job "${job.type}": unique`;
  const fail = (what: string): never => {
    throw new StagecoachError('INVALID_REQUEST', `${where}: ${what}`);
  };
  const value: unknown = job.unique;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail('must be an object');
  const policy = value as Record<string, unknown>;
  for (const field of Object.keys(policy)) if (!FIELDS.has(field)) fail(`unknown field "${field}" (known: ${[...FIELDS].join(', ')})`);
  const alias = aliasKeys(policy, fail);
  const keys = alias?.keys ?? stringList(policy.keys, 'keys', fail) ?? ['type'];
  for (const key of keys) if (!DIMENSIONS.has(key)) fail(`"keys": "${key}" is not one of type, queue, args, meta (case-sensitive)`);
  const argsKeys = alias?.argsKeys ?? stringList(policy.args_keys, 'args_keys', fail);
  const metaKeys = stringList(policy.meta_keys, 'meta_keys', fail);
  const states = stringList(policy.states, 'states', fail) ?? DEFAULT_UNIQUE_STATES;
  for (const state of states) if (!STATES.has(state)) fail(`"states": "${state}" is not an OJS job state (${[...STATES].join(', ')})`);
  const onConflict = policy.on_conflict ?? 'reject';
  if (typeof onConflict !== 'string' || !CONFLICTS.has(onConflict)) fail(`"on_conflict" must be one of ${[...CONFLICTS].join(', ')}`);
  let periodMs: number | undefined;
  if (policy.period !== undefined) {
    periodMs = typeof policy.period === 'string' ? parseDuration(policy.period) : undefined;
    if (periodMs === undefined || periodMs <= 0) fail('"period" must be an ISO 8601 duration of days to seconds, such as "PT1H" or "P7D"');
  }

  // The canonical object (OJS 4.1): `type` always; the tenant always too, so that one tenant's
  // job can never be refused, or answered with the id of, another tenant's.
  const dimensions: Record<string, unknown> = { type: job.type };
  if (job.tenant !== undefined) dimensions.tenant = job.tenant;
  if (keys.includes('queue')) dimensions.queue = job.queue;
  if (keys.includes('args')) {
    if (argsKeys === undefined) dimensions.args = job.args;
    else {
      // Stagecoach's `args` is a list (OJS core); `args_keys` name keys of its first element, the
      // one-object-argument convention (`args: [{ "user_id": 42 }]`).
      const first: unknown = job.args[0];
      if (typeof first !== 'object' || first === null || Array.isArray(first)) {
        fail('"args_keys" selects keys of the first argument, which must then be a JSON object');
      }
      const source = first as Record<string, unknown>;
      const picked: Record<string, unknown> = {};
      for (const key of argsKeys) {
        if (!Object.prototype.hasOwnProperty.call(source, key)) fail(`"args_keys": "${key}" is not a key of the first argument`);
        picked[key] = source[key];
      }
      dimensions.args = picked;
    }
  } else if (argsKeys !== undefined) fail('"args_keys" without "args" in "keys"');
  if (keys.includes('meta')) {
    if (metaKeys === undefined || metaKeys.length === 0) fail('"meta" in "keys" needs "meta_keys" (which keys of meta count)');
    const picked: Record<string, unknown> = {};
    for (const key of metaKeys as string[]) if (Object.prototype.hasOwnProperty.call(job.meta, key)) picked[key] = job.meta[key];
    dimensions.meta = picked;
  } else if (metaKeys !== undefined) fail('"meta_keys" without "meta" in "keys"');
  return {
    key: createHash('sha256').update(canonicalJson(dimensions)).digest('hex'),
    periodMs,
    states: states as UniqueState[],
    onConflict: onConflict as UniqueConflict,
  };
}

/**
 * Canonical JSON (OJS 4.1, RFC 8785 as far as JSON values go): object keys sorted at every level,
 * no whitespace, strings (keys too) in Unicode NFC, numbers as ECMAScript prints them (which is
 * what RFC 8785 prescribes). `undefined` members are left out, as JSON.stringify leaves them.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'string') return JSON.stringify(value.normalize('NFC'));
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .map(([key, item]) => [key.normalize('NFC'), item] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  throw new StagecoachError('INVALID_REQUEST', `a ${typeof value} is not a JSON value`);
}

/**
 * `key`, as ojs-core's example and the official SDKs write it, read into `keys` and `args_keys`:
 * a dimension's name (`type`, `queue`, `args`, `meta`) counts that dimension, as in `keys` (the
 * Python SDK's `["type", "queue", "args"]`); any other name is a key of the first argument, as
 * in `args_keys` (ojs-core's `["report_id"]`, the JS SDK's `["id"]`), and brings `args` in.
 * `type` always counts. Given with `keys` or `args_keys` it is refused: two spellings of one
 * policy could disagree.
 */
function aliasKeys(policy: Record<string, unknown>, fail: (what: string) => never): { keys: string[]; argsKeys?: string[] } | undefined {
  const key = stringList(policy.key, 'key', fail);
  if (key === undefined) return undefined;
  if (policy.keys !== undefined || policy.args_keys !== undefined)
    fail('"key" is the alias of "keys" and "args_keys": give one or the other');
  const dimensions = key.filter((name) => DIMENSIONS.has(name));
  const argsKeys = key.filter((name) => !DIMENSIONS.has(name));
  if (argsKeys.length === 0) return { keys: dimensions.length === 0 ? ['type'] : dimensions };
  return { keys: [...new Set(['type', ...dimensions, 'args'])], argsKeys };
}

function stringList(value: unknown, field: string, fail: (what: string) => never): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) return fail(`"${field}" must be a list of strings`);
  if (new Set(value).size !== value.length) fail(`"${field}" names an item twice`);
  return value as string[];
}
