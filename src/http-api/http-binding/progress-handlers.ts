import { ApiError } from '../api-error.js';
import { settingsFor } from '../../config/queue-resolver.js';
import { readJsonValue } from '../request-body.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import type { BindingContext } from './binding-context.js';
import { bindingJobView } from './binding-job-view.js';
import type { JobProgress } from './job-progress.js';
import type { JobRow } from '../../job-state/job-lifecycle.js';
import { checkVisible, visibleJobs } from './request-tenant.js';
import { jobIdOf } from './tenant-job-ids.js';

const MAX_PROGRESS_BYTES = 64 * 1024;

/**
 * `PUT /ojs/v1/jobs/{id}/progress` `{ progress?, message?, data? }` (spec/ojs-progress.md 6.1): an
 * HTTP worker's report for a job it holds. Taken while the job is claimed here (`active`), ignored
 * otherwise (a report racing the ack is no error); 200 with the job's progress either way. A job
 * the caller may not see is 404.
 */
export async function putProgress(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const asked = request.params.id ?? '';
  const body = (await readJsonValue(request.req, MAX_PROGRESS_BYTES, 'INVALID_REQUEST')) as Record<string, unknown> | null;
  const { progress, message, data } = body ?? {};
  if (progress !== undefined && progress !== null && (typeof progress !== 'number' || !Number.isFinite(progress))) {
    throw new ApiError(
      400,
      'INVALID_REQUEST',
      `"progress" must be a number from 0.0 to 1.0, got ${JSON.stringify(progress)?.slice(0, 60)}`,
    );
  }
  if (message !== undefined && message !== null && typeof message !== 'string')
    throw new ApiError(400, 'INVALID_REQUEST', '"message" must be a string');
  if ((progress ?? undefined) === undefined && (message ?? undefined) === undefined && (data ?? undefined) === undefined) {
    throw new ApiError(400, 'INVALID_REQUEST', 'a progress report needs "progress", "message" or "data"');
  }
  const id = await jobIdOf(ctx, request, asked);
  const { state, tenant } = await stateOf(ctx, request, id, asked);
  const held = ctx.board.claimOf(id);
  if (held !== undefined) {
    const report = ctx.progress.report(
      id,
      (progress as number | null) ?? undefined,
      (message as string | null) ?? undefined,
      data ?? undefined,
    );
    const config = await ctx.admin.configFile.load();
    // Information, never awaited: `progress.updated` in GET /ojs/v1/events and on `<prefix>.events`.
    if (settingsFor(config, held.job.queue, tenant).events)
      void ctx.publishEvent('progress.updated', id, {
        job_type: held.job.type,
        queue: held.job.queue,
        ...(tenant === undefined ? {} : { tenant }),
        progress: report.progress,
        ...(report.message === undefined ? {} : { message: report.message }),
      });
  }
  return { status: 200, body: progressView(asked, state, ctx.progress.get(id)) };
}

/** `GET /ojs/v1/jobs/{id}/progress` (ojs-progress 7.1): `progress: null` when none was reported; 1.0 once completed. */
export async function getProgress(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const asked = request.params.id ?? '';
  const id = await jobIdOf(ctx, request, asked);
  const { state, row } = await stateOf(ctx, request, id, asked);
  // An HTTP worker's report, else a native stage's (`ctx.progress`) from the job store.
  const stored = row?.progress;
  const report =
    ctx.progress.get(id) ??
    (stored === undefined
      ? undefined
      : { progress: stored.value, ...(stored.message === undefined ? {} : { message: stored.message }), updated_at: stored.at });
  return { status: 200, body: progressView(asked, state, report), headers: { 'Cache-Control': 'no-cache' } };
}

/** The job's progress as INFO shows it beside the job's fields (absent when none was reported). */
export function progressFields(report: JobProgress | undefined, state: unknown): Record<string, unknown> {
  if (report === undefined) return {};
  return {
    progress: state === 'completed' ? 1 : report.progress,
    ...(report.message === undefined ? {} : { progress_message: report.message }),
  };
}

function progressView(id: string, state: string, report: JobProgress | undefined): Record<string, unknown> {
  // ojs-progress 8.1: a completed job that reported progress is done.
  const progress = report === undefined ? null : state === 'completed' ? 1 : report.progress;
  return {
    job_id: id,
    state,
    progress,
    message: report?.message ?? null,
    data: report?.data ?? null,
    updated_at: report?.updated_at ?? null,
  };
}

/** The state of the job kept under `id`, which the request names `asked`. */
async function stateOf(
  ctx: BindingContext,
  request: ApiRequest,
  id: string,
  asked: string,
): Promise<{ state: string; tenant: string | undefined; row?: JobRow }> {
  const held = ctx.board.claimOf(id);
  if (held !== undefined) {
    checkVisible(request, asked, held.job.tenant);
    return { state: 'active', tenant: held.job.tenant };
  }
  const row = await visibleJobs(await ctx.admin.jobs(), request).get(id);
  const pushed = ctx.envelopes.get(id);
  if (row === undefined && pushed === undefined) throw new ApiError(404, 'NOT_FOUND', `no job "${asked}" is known`);
  const tenant = row?.tenant ?? pushed?.job.tenant;
  checkVisible(request, asked, tenant);
  return { state: String(bindingJobView(row, pushed).state), tenant, ...(row === undefined ? {} : { row }) };
}
