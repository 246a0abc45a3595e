import { ApiError } from '../api-error.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import type { BindingContext } from './binding-context.js';
import { confinedTo, tenantOf } from './request-tenant.js';

/** Events one poll returns unless it asks for another `limit` (spec/ojs-events.md 6.4). */
export const EVENT_PAGE = 100;
export const EVENT_PAGE_MAX = 1000;

/**
 * `GET /ojs/v1/events?after=&types=&queues=&job_types=&limit=` (spec/ojs-events.md 6.4, HTTP
 * polling): the events this server has read from `<prefix>.events` (EventLog), oldest first;
 * 200 `{ events, cursor, has_more }`. A tenant's token (or the admin acting for a tenant) sees
 * that tenant's events only.
 */
export async function listEvents(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  await ctx.events.listen();
  const list = (name: string): string[] | undefined => {
    const raw = request.query.get(name);
    return raw === null || raw.trim() === ''
      ? undefined
      : raw
          .split(',')
          .map((item) => item.trim())
          .filter((item) => item !== '');
  };
  const rawLimit = request.query.get('limit');
  const limit = rawLimit === null || rawLimit === '' ? EVENT_PAGE : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > EVENT_PAGE_MAX) {
    throw new ApiError(400, 'INVALID_REQUEST', `"limit" must be an integer from 1 to ${EVENT_PAGE_MAX}, got ${JSON.stringify(rawLimit)}`);
  }
  const tenant = confinedTo(request) ?? tenantOf(request);
  const types = list('types');
  const queues = list('queues');
  const jobTypes = list('job_types');
  const after = request.query.get('after');
  const { events, has_more } = ctx.events.read({
    limit,
    ...(types === undefined ? {} : { types }),
    ...(queues === undefined ? {} : { queues }),
    ...(jobTypes === undefined ? {} : { jobTypes }),
    ...(tenant === undefined ? {} : { tenant }),
    ...(after === null || after === '' ? {} : { after }),
  });
  const cursor = events.at(-1)?.id ?? (after === null || after === '' ? undefined : after);
  return { status: 200, body: { events, ...(cursor === undefined ? {} : { cursor }), has_more } };
}
