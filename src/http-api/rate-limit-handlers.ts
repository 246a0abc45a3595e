import type { LimitConfig } from '../config/config.types.js';
import { announceLimits } from '../control/announce-limits.js';
import { configuredLimitOf, inspectLimits, unusedLimitReport, type LimitShape } from '../inspect/limit-report.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { readJsonObject } from './request-body.js';
import { integerParam } from './request-params.js';
import type { ApiRequest, ApiResponse } from './router.js';

/** The limit fields a PUT may set (OJS rate-limiting extension 10.2, plus `per_tenant`). */
const LIMIT_FIELDS = ['concurrency', 'rate', 'throttle', 'per_tenant'];

/** `GET /ojs/v1/rate-limits?page=&per_page=`: every partition under the prefix (extension 10.3). */
export async function listRateLimits(ctx: AdminContext, { query }: ApiRequest): Promise<ApiResponse> {
  const config = await ctx.configFile.load();
  const all = await inspectLimits(config);
  const page = integerParam(query, 'page', 1, 1, 1_000_000);
  const perPage = integerParam(query, 'per_page', 20, 1, 500);
  const items = all.slice((page - 1) * perPage, page * perPage);
  return { status: 200, body: { items, pagination: { total: all.length, page, per_page: perPage } } };
}

/**
 * `GET /ojs/v1/rate-limits/{key}`: one partition (extension 10.1). One the broker does not hold
 * yet (no job has needed a token of it) is answered with every token free (`on_broker: false`)
 * when the configuration names its limit, or else when `pushed` knows a job carrying a policy of
 * that key; 404 otherwise.
 * @param pushed the policy of a job pushed through this server under `key`, if any
 */
export async function getRateLimit(
  ctx: AdminContext,
  { params }: ApiRequest,
  pushed: (key: string) => LimitShape | undefined = () => undefined,
): Promise<ApiResponse> {
  const config = await ctx.configFile.load();
  const key = params.key;
  const [report] = await inspectLimits(config, key);
  if (report !== undefined) return { status: 200, body: report };
  const configured = configuredLimitOf(config, key);
  if (configured !== undefined) return { status: 200, body: unusedLimitReport(key, configured, true) };
  const carried = pushed(key);
  if (carried !== undefined) return { status: 200, body: unusedLimitReport(key, carried, false) };
  throw new ApiError(404, 'NOT_FOUND', `no flow limit "${key}": not configured, not on the broker, and no job pushed here carries it`);
}

/**
 * `PUT /ojs/v1/rate-limits/{key}` (extension 10.2): the body replaces the named limit
 * `limits.<key>` in the configuration file, and running stages take it within a second (a
 * `limits` control message; docs/flow-control.md). A change is kept until changed again:
 * `expires_at` is refused rather than forgotten at an admin server's restart. Queue partitions
 * (`queue:...`) are changed through `PUT /ojs/v1/queues/{name}/config`, a tenant's partition
 * (`<key>@<tenant>`) through its limit.
 */
export function putRateLimit(ctx: AdminContext, { params, req }: ApiRequest): Promise<ApiResponse> {
  const key = params.key;
  return (async () => {
    const body = await readJsonObject(req);
    if (key.startsWith('queue:')) {
      throw new ApiError(
        422,
        'INVALID_REQUEST',
        `"${key}" is a queue's own limit: change it with PUT /ojs/v1/queues/{name}/config (concurrency, rate_limit)`,
      );
    }
    if (key.includes('@')) {
      throw new ApiError(
        422,
        'INVALID_REQUEST',
        `"${key}" is one tenant's partition of limit "${key.split('@')[0]}": every tenant's follows that limit; PUT it`,
      );
    }
    if ('expires_at' in body) {
      throw new ApiError(
        422,
        'INVALID_REQUEST',
        'expires_at is not supported: a change is kept in the configuration file until changed again',
        {
          fields: ['expires_at'],
        },
      );
    }
    const others = Object.keys(body).filter((field) => !LIMIT_FIELDS.includes(field));
    if (others.length > 0)
      throw new ApiError(422, 'INVALID_REQUEST', `unknown limit fields: ${others.join(', ')} (allowed: ${LIMIT_FIELDS.join(', ')})`, {
        fields: others,
      });
    return ctx.serializer.run(async () => {
      const raw = await ctx.configFile.readRaw();
      const next = { ...raw, limits: { ...raw.limits, [key]: body as LimitConfig } };
      const config = await ctx.configFile.write(next);
      await announceLimits(config, ctx.log, { key });
      ctx.log.info('flow limit changed through the admin API', { key, limit: body });
      return { status: 200, body: { key, limit: body } };
    });
  })();
}
