import type { CompiledConfig } from '../config/config.types.js';
import { isTenantSlug } from '../util/tenant-slug.js';
import { ApiError } from './api-error.js';
import { isQueueName, QUEUE_NAME_RULE } from '../util/queue-name.js';

/** A variant name: a part of a broker name, so no dots. */
const VARIANT_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_-]{0,99}$/;

/** The `{name}` of a path, checked; `_default` is refused where a real queue is meant. */
export function queueName(params: Readonly<Record<string, string>>): string {
  const name = params.name ?? '';
  if (name === '_default') {
    throw new ApiError(400, 'INVALID_REQUEST', '"_default" is the default queue policy, not a queue: use /ojs/v1/queues/_default/config');
  }
  if (!isQueueName(name)) {
    throw new ApiError(400, 'INVALID_REQUEST', `${JSON.stringify(name).slice(0, 120)} is not a queue name (${QUEUE_NAME_RULE})`);
  }
  return name;
}

/** `?tenant=`, checked as a tenant slug; undefined when absent. */
export function tenantParam(query: URLSearchParams): string | undefined {
  const tenant = query.get('tenant');
  if (tenant === null) return undefined;
  if (!isTenantSlug(tenant)) {
    throw new ApiError(400, 'INVALID_REQUEST', `?tenant=: "${tenant}" is not a tenant slug (^[a-z0-9][a-z0-9_-]{0,62}$)`);
  }
  return tenant;
}

/** `?variant=`; undefined when absent. */
export function variantParam(query: URLSearchParams): string | undefined {
  const variant = query.get('variant');
  if (variant === null) return undefined;
  if (!VARIANT_NAME.test(variant)) throw new ApiError(400, 'INVALID_REQUEST', `?variant=: "${variant}" is not a variant name`);
  return variant;
}

/** A tenant on a shared queue names nothing: one physical queue serves every tenant. */
export function checkScope(config: CompiledConfig, queue: string, tenant: string | undefined): void {
  const scope = config.queues.get(queue)?.scope ?? config.defaultQueue.scope;
  if (scope === 'shared' && tenant !== undefined) {
    throw new ApiError(400, 'INVALID_REQUEST', `queue "${queue}" is shared (one queue for every tenant): drop ?tenant=`);
  }
}

/** A whole number in [min, max] from the query, or `fallback` when absent or empty. */
export function integerParam(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const text = query.get(name);
  if (text === null || text === '') return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max) {
    throw new ApiError(400, 'INVALID_REQUEST', `?${name}=: "${text}" is not a whole number from ${min} to ${max}`);
  }
  return value;
}

/** A state word for a filter (`?state=running`, `?state=failed`): lower-case letters and `_`; undefined when absent or empty. */
export function stateParam(query: URLSearchParams): string | undefined {
  const state = query.get('state');
  if (state === null || state === '') return undefined;
  if (!/^[a-z_]{1,32}$/.test(state)) throw new ApiError(400, 'INVALID_REQUEST', `?state=: "${state}" is not a state word`);
  return state;
}
