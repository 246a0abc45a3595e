import type { CompiledConfig, QueueSettings } from '../config/config.types.js';
import { settingsFor } from '../config/queue-resolver.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { ownEntry, replaceQueueEntry } from './config-handlers.js';
import { reportsOf } from './queue-lookup.js';
import { readJsonObject } from './request-body.js';
import { checkScope, queueName, tenantParam } from './request-params.js';
import type { ApiRequest, ApiResponse } from './router.js';

/** The largest bound the broker takes (a policy's `max-length`), as `max_size` in the schema. */
const MAX_BOUND = Number.MAX_SAFE_INTEGER;

/** The strategies of ojs-backpressure 5: the `overflow_policy` of the same name. */
const STRATEGIES = ['reject', 'block', 'drop_oldest'] as const;

/** ojs-backpressure 6.2: the queue's bounds in the extension's words. */
export interface BackpressureView {
  /** `max_size`; 0: unbounded. */
  max_depth: number;
  /** `max_size_bytes`; 0: unbounded. */
  max_size_bytes: number;
  /** `overflow_policy`. */
  strategy: (typeof STRATEGIES)[number];
  /** `max_size_warning`. */
  warning_threshold: number;
}

/**
 * The ojs-backpressure view of a queue's settings: its bounds are stagecoach's `max_size`,
 * `max_size_bytes`, `overflow_policy` and `max_size_warning` (docs/flow-control.md), per
 * physical queue: a tenant-scoped queue's bound holds for each tenant's queue on its own.
 */
export function backpressureView(config: CompiledConfig, name: string, tenant: string | undefined): BackpressureView {
  const settings = settingsFor(config, name, tenant);
  return {
    max_depth: settings.max_size ?? 0,
    max_size_bytes: settings.max_size_bytes ?? 0,
    strategy: settings.overflow_policy,
    warning_threshold: settings.max_size_warning,
  };
}

/** `GET /ojs/v1/admin/queues/{name}/config[?tenant=T]`: `{ name, tenant?, backpressure }`. */
export async function getBackpressure(ctx: AdminContext, { params, query }: ApiRequest): Promise<ApiResponse> {
  const name = queueName(params);
  const tenant = tenantParam(query);
  const config = await ctx.configFile.load();
  checkScope(config, name, tenant);
  await reportsOf(ctx, config, name, tenant);
  return { status: 200, body: { name, ...(tenant === undefined ? {} : { tenant }), backpressure: backpressureView(config, name, tenant) } };
}

/**
 * `PUT /ojs/v1/admin/queues/{name}/config[?tenant=T]` `{ backpressure: { max_depth?, max_size_bytes?,
 * strategy?, warning_threshold? } }` (ojs-backpressure 6.2): the fields given change the queue's
 * settings (`0` is unbounded), the others are kept; then as `PUT /ojs/v1/queues/{name}/config`
 * (on the broker at once, then in the file). A queue not known yet is given its entry in the file
 * (its other fields from `_default`): bounds are set before the first push. With `?tenant=T`,
 * that tenant's own settings of the queue.
 */
export async function putBackpressure(ctx: AdminContext, { params, query, req }: ApiRequest): Promise<ApiResponse> {
  const name = queueName(params);
  const tenant = tenantParam(query);
  const settings = readBackpressure(await readJsonObject(req));
  const { body, after } = await replaceQueueEntry(ctx, name, tenant, (raw) => ({ ...ownEntry(raw, name, tenant), ...settings }), true);
  return { status: 200, body: { ...body, backpressure: backpressureView(after, name, tenant) } };
}

/**
 * The queue settings a request's `backpressure` object names.
 * @throws ApiError 400 naming the field that is missing, unknown or out of range.
 */
export function readBackpressure(body: Record<string, unknown>): QueueSettings {
  const others = Object.keys(body).filter((key) => key !== 'backpressure');
  if (others.length > 0) {
    throw new ApiError(
      400,
      'INVALID_REQUEST',
      `this path takes "backpressure" only, not ${others.join(', ')}: the queue's other settings are PUT /ojs/v1/queues/{name}/config`,
      { fields: others },
    );
  }
  const given = body.backpressure;
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw new ApiError(
      400,
      'INVALID_REQUEST',
      '"backpressure" must be an object: { max_depth?, max_size_bytes?, strategy?, warning_threshold? }',
    );
  }
  const fields = given as Record<string, unknown>;
  const settings: QueueSettings = {};
  for (const [key, value] of Object.entries(fields)) {
    const field = `backpressure.${key}`;
    if (key === 'max_depth') settings.max_size = bound(field, value);
    else if (key === 'max_size_bytes') settings.max_size_bytes = bound(field, value);
    else if (key === 'strategy') {
      if (!(STRATEGIES as readonly unknown[]).includes(value)) {
        throw new ApiError(400, 'INVALID_REQUEST', `${field} must be one of ${STRATEGIES.join(', ')}`, { field });
      }
      settings.overflow_policy = value as QueueSettings['overflow_policy'];
    } else if (key === 'warning_threshold') {
      if (typeof value !== 'number' || !(value >= 0 && value <= 1)) {
        throw new ApiError(400, 'INVALID_REQUEST', `${field} must be a number from 0 to 1 (a fraction of max_depth)`, { field });
      }
      settings.max_size_warning = value;
    } else {
      throw new ApiError(
        400,
        'INVALID_REQUEST',
        `${field} is not a backpressure setting (max_depth, max_size_bytes, strategy, warning_threshold)`,
        {
          field,
        },
      );
    }
  }
  return settings;
}

/** A bound as the extension writes it (0: unbounded), as the file writes it (null: unlimited). */
function bound(field: string, value: unknown): number | null {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_BOUND) {
    throw new ApiError(400, 'INVALID_REQUEST', `${field} must be a whole number from 0 (unbounded) to 2^53-1`, { field });
  }
  return value === 0 ? null : value;
}
