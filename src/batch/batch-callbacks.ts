import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import type { BatchCallbacks, CallbackName, CallbackSpec, HeaderValue } from '../job/job.types.js';
import { uuidv5 } from '../job/uuid-v5.js';
import { identitiesOf } from '../security/broker-users.js';
import { isTenantSlug, notATenantSlug } from '../util/tenant-slug.js';
import type { BatchCounts } from './batch-fold.js';
import type { TrackingRecord } from '../tracking-stream/tracking-report.js';

/**
 * OJS batch callbacks (docs/batches.md, Callbacks): jobs a batch names when its root is
 * published, which the tracker publishes when it announces the batch complete. This module is
 * the pure part: what a declaration may hold, which callbacks a finished batch runs, and the
 * id and meta of a callback job.
 */

/** The callback names, in the order the tracker publishes them. */
export const CALLBACK_NAMES: readonly CallbackName[] = ['on_complete', 'on_success', 'on_failure'];

const SPEC_KEYS: ReadonlySet<string> = new Set(['queue', 'type', 'args', 'tenant', 'meta', 'headers']);

/**
 * Every callback job id is a UUIDv5 in this namespace of the name `<batch>/<callback>`: the same
 * callback of the same batch always has the same id (fixed here once; never change it, or a
 * callback published again across an upgrade would not be recognised as a repeat).
 */
export const CALLBACK_ID_NAMESPACE = '5d0c3f0e-8a4b-4c8e-9b1e-7f3a2c6d9e41';

/** The id of a batch's callback job: the same at every publication (consumers drop repeats by it). */
export function callbackJobId(batch: string, name: CallbackName): string {
  return uuidv5(`${batch}/${name}`, CALLBACK_ID_NAMESPACE);
}

/**
 * Checks a `callbacks` object (`{ on_complete?, on_success?, on_failure? }`) and returns it
 * typed, copied to the known keys. Structure only: whether the queue exists and takes the
 * batch's tenant is the publisher's check (it knows the configuration).
 * @param where what carried it (`callbacks`): every message starts with it and the callback's name.
 * @throws StagecoachError `INVALID_REQUEST` (exit code 2 on the command line) naming what is wrong.
 */
export function checkCallbacks(value: unknown, where: string): BatchCallbacks {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    invalid(`${where} must be an object with any of ${CALLBACK_NAMES.join(', ')}, got ${describe(value)}`);
  }
  const callbacks: BatchCallbacks = {};
  for (const [key, spec] of Object.entries(value)) {
    if (!(CALLBACK_NAMES as readonly string[]).includes(key)) {
      invalid(`${where}: unknown callback "${key}" (expected ${CALLBACK_NAMES.join(', ')})`);
    }
    if (spec === undefined) continue;
    callbacks[key as CallbackName] = checkCallbackSpec(spec, `${where}.${key}`);
  }
  return callbacks;
}

/**
 * Checks one callback job spec: `queue` and `type` non-empty strings, `args` a JSON array,
 * `tenant` a slug, `meta` an object, `headers` an object of strings, numbers and booleans; no
 * other key (a misspelt `arg` would otherwise be dropped in silence).
 * @throws StagecoachError `INVALID_REQUEST` whose message starts with `where`.
 */
export function checkCallbackSpec(value: unknown, where: string): CallbackSpec {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    invalid(`${where} must be a job spec object such as {"queue":"q","type":"t","args":[]}, got ${describe(value)}`);
  }
  const spec = value as Record<string, unknown>;
  for (const key of Object.keys(spec)) {
    if (!SPEC_KEYS.has(key)) invalid(`${where}: unknown field "${key}" (a callback takes ${[...SPEC_KEYS].join(', ')})`);
  }
  if (typeof spec.queue !== 'string' || spec.queue.length === 0) invalid(`${where}: "queue" must be a non-empty string`);
  if (typeof spec.type !== 'string' || spec.type.length === 0) invalid(`${where}: "type" must be a non-empty string`);
  if (spec.args !== undefined && !Array.isArray(spec.args)) invalid(`${where}: "args" must be a JSON array, got ${describe(spec.args)}`);
  if (spec.tenant !== undefined && !isTenantSlug(spec.tenant)) invalid(`${where}: "tenant": ${notATenantSlug(spec.tenant)}`);
  if (spec.meta !== undefined && (typeof spec.meta !== 'object' || spec.meta === null || Array.isArray(spec.meta))) {
    invalid(`${where}: "meta" must be an object, got ${describe(spec.meta)}`);
  }
  // A callback job in a batch would keep that batch open (its own, for ever) or start one from
  // the tracker; neither is what a callback is.
  if (spec.meta !== undefined && 'batch' in spec.meta) invalid(`${where}: "meta.batch" is not allowed: a callback job is in no batch`);
  if (spec.headers !== undefined) {
    const headers = spec.headers;
    if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) {
      invalid(`${where}: "headers" must be an object, got ${describe(headers)}`);
    }
    for (const [name, header] of Object.entries(headers)) {
      // x-ojs-* headers are the binding's (tenant, queue, attempt, batch...): set by stagecoach.
      if (name.toLowerCase().startsWith('x-ojs-'))
        invalid(`${where}: header "${name}" is reserved (x-ojs-* headers are set by stagecoach)`);
      if (!['string', 'number', 'boolean'].includes(typeof header)) {
        invalid(`${where}: header "${name}" must be a string, number or boolean, got ${describe(header)}`);
      }
    }
  }
  const checked: CallbackSpec = { queue: spec.queue, type: spec.type, args: (spec.args as unknown[] | undefined) ?? [] };
  if (spec.tenant !== undefined) checked.tenant = spec.tenant;
  if (spec.meta !== undefined) checked.meta = spec.meta as Record<string, unknown>;
  if (spec.headers !== undefined) checked.headers = spec.headers as Record<string, HeaderValue>;
  return checked;
}

/** How a batch ended, as the callback decision needs it. */
export interface BatchEnd {
  /** Cancelled (`batch cancel`): only `on_complete` runs. */
  cancelled: boolean;
  /** Jobs that ended in failure (dead or discarded). */
  failed: number;
}

/**
 * The callbacks a batch that just ended runs, in publication order: `on_complete` always;
 * `on_success` when no job failed; `on_failure` when at least one did; a cancelled batch runs
 * `on_complete` only (it neither succeeded nor failed: it was stopped).
 */
export function callbacksToRun(callbacks: BatchCallbacks | undefined, end: BatchEnd): Array<{ name: CallbackName; spec: CallbackSpec }> {
  if (callbacks === undefined) return [];
  const names: CallbackName[] = ['on_complete'];
  if (!end.cancelled) names.push(end.failed > 0 ? 'on_failure' : 'on_success');
  return names.flatMap((name) => {
    const spec = callbacks[name];
    return spec === undefined ? [] : [{ name, spec }];
  });
}

/**
 * `meta.batch_callback` of a callback job: the batch it reports on, which callback it is, how
 * the batch ended and its counts at the announcement. In `meta`, not in `args`, so the args stay
 * exactly what the declaration said (the callback's own contract).
 */
export interface CallbackMeta {
  batch: string;
  callback: CallbackName;
  state: 'completed' | 'cancelled';
  tenant?: string;
  failed: boolean;
  jobs: BatchCounts;
}

export function callbackMeta(batch: { id: string; tenant?: string }, name: CallbackName, end: BatchEnd, counts: BatchCounts): CallbackMeta {
  return {
    batch: batch.id,
    callback: name,
    state: end.cancelled ? 'cancelled' : 'completed',
    ...(batch.tenant === undefined ? {} : { tenant: batch.tenant }),
    failed: end.failed > 0,
    jobs: { ...counts },
  };
}

/**
 * The record as the tracker may act on it. With `security.tenantUsers`, callbacks are taken only
 * from a `created` record whose broker-validated `user_id` may act for the batch's tenant: the
 * tracker publishes them with its own trusted user, so a tenant's producer must not make it
 * publish jobs for another tenant. Otherwise the record is returned without its callbacks (it
 * still counts as the batch's root, as any record does: docs/batches.md). Every other record is
 * returned as it is (the same object).
 */
export function withTrustedCallbacks(config: CompiledConfig, record: TrackingRecord, userId: string | undefined): TrackingRecord {
  if (record.kind !== 'created' || record.callbacks === undefined || !config.security.tenantUsers) return record;
  if (identitiesOf(config).mayActFor(record.tenant, userId)) return record;
  const stripped = { ...record };
  delete stripped.callbacks;
  return stripped;
}

function describe(value: unknown): string {
  return JSON.stringify(value)?.slice(0, 140) ?? String(value);
}

function invalid(message: string): never {
  throw new StagecoachError('INVALID_REQUEST', message);
}
