import { jobState, type TrackedJob } from '../batch/batch-fold.js';
import { BATCH_DIRECTIVES, TENANT_DIRECTIVES } from '../directives/batch-directives.js';
import { batchView, jobSummary } from '../batch/batch-views.js';
import { checkTenantSlug } from '../util/tenant-slug.js';
import { checkBatchId } from '../util/batch-id.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { integerParam, stateParam, tenantParam } from './request-params.js';
import type { ApiRequest, ApiResponse } from './router.js';

/** Batches a list shows unless `?limit=` says otherwise, and the most it shows. */
const DEFAULT_BATCHES = 1000;
const MAX_BATCHES = 100_000;
/** Jobs of one batch a list shows unless `?limit=` says otherwise, and the most it shows. */
const DEFAULT_JOBS = 100;
const MAX_JOBS = 10_000;

/**
 * `GET /ojs/v1/batches[?tenant=T][&state=S][&limit=N]`: every batch the tracking stream knows
 * (its retention, `tracking.max_age`), each as `batch status --json` prints it, in the order
 * they were first seen. `limit` keeps the latest N; `total` says how many matched.
 */
export async function listBatches(ctx: AdminContext, { query }: ApiRequest): Promise<ApiResponse> {
  const tenant = tenantParam(query);
  const state = stateParam(query);
  const limit = integerParam(query, 'limit', DEFAULT_BATCHES, 1, MAX_BATCHES);
  const fold = await ctx.batches.fold();
  const views = [...fold.batches.values()]
    .filter((batch) => tenant === undefined || batch.tenant === tenant)
    .map(batchView)
    .filter((view) => state === undefined || view.state === state);
  return {
    status: 200,
    body: {
      batches: views.slice(Math.max(0, views.length - limit)),
      total: views.length,
      ...(tenant === undefined ? {} : { tenant }),
      ...(state === undefined ? {} : { state }),
    },
  };
}

/** `GET /ojs/v1/batches/{id}`: one batch, as `batch status <id> --json` prints it. */
export async function batchDetails(ctx: AdminContext, { params, query }: ApiRequest): Promise<ApiResponse> {
  const id = checkBatchId(params.id ?? '', 'batch');
  // Each tenant's batch of an id is its own: `?tenant=` names whose (else the one of no tenant, or the first seen).
  const batch = (await ctx.batches.fold()).batch(id, tenantParam(query));
  if (batch === undefined) throw unknownBatch(id);
  return { status: 200, body: batchView(batch) };
}

/**
 * `GET /ojs/v1/batches/{id}/jobs[?state=S][&limit=N]`: the batch's jobs, each as `job status`
 * shows it without its history (and with a count of its children). `state` is a `job status`
 * state (`completed`, `dead`, `retrying`, ...), or `failed` (ended dead or discarded) or
 * `in_flight` (not settled), the batch counts' words. `total` says how many matched.
 */
export async function batchJobs(ctx: AdminContext, { params, query }: ApiRequest): Promise<ApiResponse> {
  const id = checkBatchId(params.id ?? '', 'batch');
  const state = stateParam(query);
  const limit = integerParam(query, 'limit', DEFAULT_JOBS, 1, MAX_JOBS);
  const fold = await ctx.batches.fold();
  const batch = fold.batch(id, tenantParam(query));
  if (batch === undefined) throw unknownBatch(id);
  // The fold keys jobs by id only: a scan, bounded by the stream's retention, paid per request.
  const jobs: TrackedJob[] = [];
  for (const job of fold.jobs.values()) if (job.batchKey === batch.key && job.cls !== 'withdrawn' && matches(job, state)) jobs.push(job);
  return {
    status: 200,
    body: { batch: id, ...(state === undefined ? {} : { state }), total: jobs.length, jobs: jobs.slice(0, limit).map(jobSummary) },
  };
}

/** The batch counts' words (`failed`, `in_flight`) or a `job status` state. */
function matches(job: TrackedJob, state: string | undefined): boolean {
  if (state === undefined) return true;
  if (state === 'failed') return job.cls === 'dead' || job.cls === 'discarded';
  if (state === 'in_flight') return job.cls === 'in_flight';
  return jobState(job) === state;
}

function unknownBatch(id: string): ApiError {
  return new ApiError(404, 'NOT_FOUND', `no report names batch "${id}" (the stream keeps tracking.max_age)`);
}

/**
 * `POST /ojs/v1/batches/{id}/cancel|pause|resume` (bearer token): what `batch cancel|pause|resume`
 * does, answered with its result (`moved`: parked jobs sent on). Serialized with the other changes.
 */
export function batchDirective(action: keyof typeof BATCH_DIRECTIVES) {
  return async (ctx: AdminContext, { params }: ApiRequest): Promise<ApiResponse> => {
    const id = checkBatchId(params.id ?? '', 'batch');
    return ctx.serializer.run(async () => {
      const result = await BATCH_DIRECTIVES[action](await ctx.configFile.load(), id, ctx.log);
      ctx.log.info('batch directive through the admin API', { ...result });
      return { status: 200, body: result };
    });
  };
}

/** `POST /ojs/v1/tenants/{tenant}/pause|resume` (bearer token): `tenant pause|resume`. */
export function tenantDirective(action: keyof typeof TENANT_DIRECTIVES) {
  return async (ctx: AdminContext, { params }: ApiRequest): Promise<ApiResponse> => {
    const tenant = checkTenantSlug(params.tenant ?? '', 'tenant');
    return ctx.serializer.run(async () => {
      const result = await TENANT_DIRECTIVES[action](await ctx.configFile.load(), tenant, ctx.log);
      ctx.log.info('tenant directive through the admin API', { ...result });
      return { status: 200, body: result };
    });
  };
}
