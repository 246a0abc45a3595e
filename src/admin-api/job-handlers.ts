import { cancelJob } from '../batch/job-cancel.js';
import { jobFilter, pageLimit } from '../job-state/job-filter.js';
import { jobStateView } from '../job-state/job-views.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import type { ApiRequest, ApiResponse } from './router.js';

/** `GET /ojs/v1/jobs/{id}`: any tracked job, as `job status <id> --json` prints it (docs/job-state.md). */
export async function jobDetails(ctx: AdminContext, { params }: ApiRequest): Promise<ApiResponse> {
  const id = params.id ?? '';
  const row = await (await ctx.jobs()).get(id);
  if (row === undefined) throw new ApiError(404, 'NOT_FOUND', `no tracking report names job "${id}" (is its queue's tracking on?)`);
  return { status: 200, body: jobStateView(row) };
}

/**
 * `GET /ojs/v1/jobs?tenant=&queue=&state=&type=&since=&limit=&cursor=`: tracked jobs by id
 * (creation order), `{ jobs, next_cursor }` as `job list --json` prints them.
 */
export async function listJobs(ctx: AdminContext, { query }: ApiRequest): Promise<ApiResponse> {
  const value = (name: string): string | undefined => query.get(name) ?? undefined;
  const filter = jobFilter({
    tenant: value('tenant'),
    queue: value('queue'),
    state: value('state'),
    type: value('type'),
    since: value('since'),
  });
  const cursor = value('cursor');
  const page = await (await ctx.jobs()).list(filter, { limit: pageLimit(value('limit')), ...(cursor === undefined ? {} : { cursor }) });
  return { status: 200, body: { jobs: page.jobs.map((row) => jobStateView(row)), next_cursor: page.next_cursor ?? null } };
}

/**
 * `DELETE /ojs/v1/jobs/{id}` (bearer token): `job cancel`. 404 for a job no record names, 409
 * for one that runs or ended. Serialized with the other changes.
 */
export async function deleteJob(ctx: AdminContext, { params }: ApiRequest): Promise<ApiResponse> {
  const id = params.id ?? '';
  return ctx.serializer.run(async () => {
    const config = await ctx.configFile.load();
    return { status: 200, body: await cancelJob(config, id, ctx.log, await ctx.jobs()) };
  });
}
