import { jobFilter, pageLimit } from '../job-state/job-filter.js';
import { jobStateView } from '../job-state/job-views.js';
import type { AdminContext } from './admin-context.js';
import type { ApiRequest, ApiResponse } from './router.js';
import { tenantFilterOf, visibleJobs } from './http-binding/request-tenant.js';

/**
 * `GET /ojs/v1/jobs?tenant=&queue=&state=&type=&tag=&since=&limit=&cursor=`: tracked jobs by id
 * (creation order), `{ jobs, next_cursor }` as `job list --json` prints them. A tenant's token
 * lists its own tenant's jobs only (another tenant's `?tenant=` is 403).
 */
export async function listJobs(ctx: AdminContext, request: ApiRequest): Promise<ApiResponse> {
  const { query } = request;
  const value = (name: string): string | undefined => query.get(name) ?? undefined;
  const filter = jobFilter({
    tenant: tenantFilterOf(request, value('tenant')),
    queue: value('queue'),
    state: value('state'),
    type: value('type'),
    tag: value('tag'),
    since: value('since'),
  });
  const cursor = value('cursor');
  const page = await visibleJobs(await ctx.jobs(), request).list(filter, {
    limit: pageLimit(value('limit')),
    ...(cursor === undefined ? {} : { cursor }),
  });
  return { status: 200, body: { jobs: page.jobs.map((row) => jobStateView(row)), next_cursor: page.next_cursor ?? null } };
}
