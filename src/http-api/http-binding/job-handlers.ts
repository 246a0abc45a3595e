import { ApiError } from '../api-error.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import { cancelJob } from '../../directives/cancel-job.js';
import { jobStateView } from '../../job-state/job-views.js';
import { shownState } from '../../job-state/job-lifecycle.js';
import { claimedView } from './worker-handlers.js';
import { checkVisible, visibleJobs } from './request-tenant.js';
import type { BindingContext } from './binding-context.js';
import { bindingJobView } from './binding-job-view.js';
import { releasePending } from './pending-jobs.js';
import { progressFields } from './progress-handlers.js';
import { jobIdOf } from './tenant-job-ids.js';

/** `GET /ojs/v1/jobs/{id}` (INFO): `{ job }`, whatever `Accept` says (binding 4.3). */
export async function jobInfo(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const asked = request.params.id ?? '';
  const id = await jobIdOf(ctx, request, asked);
  // Claimed here: active now, whether or not its `started` report has reached the store.
  const held = ctx.board.claimOf(id);
  if (held !== undefined) {
    checkVisible(request, asked, held.job.tenant);
    return { status: 200, body: { job: { ...claimedView(ctx, held), ...progressFields(ctx.progress.get(id), 'active'), id: asked } } };
  }
  const row = await visibleJobs(await ctx.admin.jobs(), request).get(id);
  const pushed = ctx.envelopes.get(id);
  if (row === undefined && pushed === undefined) throw unknownJob(asked);
  checkVisible(request, asked, row?.tenant ?? pushed?.job.tenant);
  const job = bindingJobView(row, pushed);
  return { status: 200, body: { job: { ...job, ...progressFields(ctx.progress.get(id), job.state), id: asked } } };
}

/** `GET /ojs/v1/jobs/{id}/status`: the job as `job status <id> --json` prints it (docs/job-state.md), the dashboard's view. */
export async function jobStatus(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const asked = request.params.id ?? '';
  const row = await visibleJobs(await ctx.admin.jobs(), request).get(await jobIdOf(ctx, request, asked));
  if (row === undefined) throw unknownJob(asked);
  return { status: 200, body: { ...jobStateView(row), id: asked } };
}

/**
 * `DELETE /ojs/v1/jobs/{id}` (CANCEL): a job this server holds for a worker (claimed, `active`, or
 * waiting for a fetch) is cancelled in its handler; any other job that has not started through
 * `job cancel`; one active elsewhere, ended or already cancelled is a 409 `conflict`.
 */
export async function jobCancel(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const asked = request.params.id ?? '';
  const id = await jobIdOf(ctx, request, asked);
  const pushed = ctx.envelopes.get(id);
  const store = await ctx.admin.jobs();
  const row = await visibleJobs(store, request).get(id);
  checkVisible(request, asked, ctx.board.claimOf(id)?.job.tenant ?? row?.tenant ?? pushed?.job.tenant);
  // Held here for a worker, claimed or not: cancelled in its handler, settled `cancelled` by its runner.
  const held = ctx.board.cancel(id);
  if (held !== undefined) {
    // Settled by its runner here, not before this turn ends: the wait is registered in time.
    const local = await ctx.settlements.wait(id, held.job.attempt, held.claim?.at, undefined, held.ctx);
    const row = local?.row ?? (await (await ctx.admin.jobs()).get(id));
    return { status: 200, body: { job: { ...bindingJobView(row, pushed), id: asked } } };
  }
  if (row === undefined) throw unknownJob(asked);
  return ctx.admin.serializer.run(async () => {
    const config = await ctx.admin.configFile.load();
    const view = await cancelJob(config, id, ctx.admin.log, store);
    // Held pending: it leaves the parked queue now (never activated, never run).
    if (shownState(row) === 'pending' && (await releasePending(ctx, id, 'drop')) && pushed !== undefined) pushed.pending = false;
    return {
      status: 200,
      body: { job: { ...bindingJobView({ ...row, cancel_requested: view.cancelled_at ?? new Date().toISOString() }, pushed), id: asked } },
    };
  });
}

/**
 * `POST /ojs/v1/jobs/{id}/activate` (ACTIVATE, binding 7.8, 9.5): a job pushed `pending` goes to
 * its queue; 200 `{ job }` with `state`, `activated_at` and `previous_state: "pending"`. A job in
 * any other state is 409 (`details.current_state`), an unknown one 404.
 */
export async function jobActivate(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const asked = request.params.id ?? '';
  const id = await jobIdOf(ctx, request, asked);
  const row = await visibleJobs(await ctx.admin.jobs(), request).get(id);
  const pushed = ctx.envelopes.get(id);
  if (row === undefined && pushed === undefined) throw unknownJob(asked);
  checkVisible(request, asked, row?.tenant ?? pushed?.job.tenant);
  const state = bindingJobView(row, pushed).state as string;
  if (state !== 'pending' || !(await releasePending(ctx, id, 'activate'))) {
    // Not held (any more): another ACTIVATE or a CANCEL took it meanwhile, or it never was.
    const current = state === 'pending' ? 'available' : state;
    throw new ApiError(409, 'CONFLICT', `cannot activate job "${asked}" in state "${current}": only a pending job can be activated`, {
      job_id: asked,
      current_state: current,
    });
  }
  if (pushed !== undefined) pushed.pending = false;
  const activatedAt = new Date().toISOString();
  const job = { ...bindingJobView(row === undefined ? undefined : { ...row, state: 'available' }, pushed) };
  return { status: 200, body: { job: { ...job, id: asked, state: 'available', activated_at: activatedAt, previous_state: 'pending' } } };
}

function unknownJob(id: string): ApiError {
  return new ApiError(404, 'NOT_FOUND', `no job "${id}" is known (is its queue's tracking on?)`);
}
