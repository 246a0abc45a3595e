import type { CompiledConfig } from '../config/config.types.js';
import { isTenantSlug } from '../util/tenant-slug.js';
import { isQueueName, QUEUE_NAME_RULE } from '../util/queue-name.js';
import { DashboardRequestError } from './dashboard-errors.js';
import { MATRIX_SORTS, type MatrixSort } from './tenant-matrix.js';

/** `{name}` of a path: a logical queue that this configuration has (or would create implicitly). */
export function queueOf(config: CompiledConfig, params: Readonly<Record<string, string>>): string {
  const name = params.name ?? '';
  if (!isQueueName(name))
    throw new DashboardRequestError('queue', `${JSON.stringify(name).slice(0, 120)} is not a queue name (${QUEUE_NAME_RULE})`);
  if (config.strict_queues && !config.queues.has(name)) {
    throw new DashboardRequestError('queue', `"${name}" is not configured (strict_queues is on)`);
  }
  return name;
}

/** `?tenant=`, a tenant slug, or undefined when absent or empty. */
export function tenantOf(query: URLSearchParams): string | undefined {
  const tenant = query.get('tenant');
  if (tenant === null || tenant === '') return undefined;
  if (!isTenantSlug(tenant)) throw new DashboardRequestError('?tenant=', `"${tenant}" is not a tenant slug (^[a-z0-9][a-z0-9_-]{0,62}$)`);
  return tenant;
}

/** A whole number in [min, max] from the query, or `fallback` when absent. */
export function integerOf(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const text = query.get(name);
  if (text === null || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new DashboardRequestError(`?${name}=`, `"${text}" is not a whole number from ${min} to ${max}`);
  }
  return value;
}

/** `?sort=` of the matrix. */
export function sortOf(query: URLSearchParams): MatrixSort {
  const sort = query.get('sort') ?? 'name';
  if (!(MATRIX_SORTS as readonly string[]).includes(sort)) {
    throw new DashboardRequestError('?sort=', `"${sort}" is not one of ${MATRIX_SORTS.join(', ')}`);
  }
  return sort as MatrixSort;
}

/** A yes/no flag: `1`/`true` or `0`/`false`/absent. */
export function flagOf(query: URLSearchParams, name: string): boolean {
  const text = query.get(name);
  if (text === null || text === '' || text === '0' || text === 'false') return false;
  if (text === '1' || text === 'true') return true;
  throw new DashboardRequestError(`?${name}=`, `"${text}" is not 1, true, 0 or false`);
}
