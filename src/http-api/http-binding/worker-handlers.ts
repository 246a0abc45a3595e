import { ApiError } from '../api-error.js';
import { readJsonValue } from '../request-body.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import type { JobRow } from '../../job-state/job-lifecycle.js';
import type { Job } from '../../job/job.types.js';
import type { BindingContext } from './binding-context.js';
import { bindingJobView } from './binding-job-view.js';
import { DEFAULT_VISIBILITY_MS, VISIBILITY_RANGE_MS, type AckBody, type Held, type NackError } from './claim-board.js';
import { MAX_PUSH_BYTES } from './push-handlers.js';
import { REMOTE_CONCURRENCY, type RemoteQueue } from './remote-stages.js';
import { claimPlanned, comingFor, fetchPlanOf } from './fetch-plan.js';
import { checkVisible, confinedTo, tenantOf, visibleJobs } from './request-tenant.js';
import type { LocalSettlement } from './settlement-waits.js';
import { heldIdOf, jobIdOf, shownIdOf } from './tenant-job-ids.js';

/** Jobs one fetch claims unless it asks for another `count` (at most REMOTE_CONCURRENCY). */
export const DEFAULT_FETCH_COUNT = 1;
/**
 * How long a fetch waits for jobs when none is held but the broker has some ready (they are on
 * their way to the server), or when the request asks to wait (`wait_ms`, long-poll) at most.
 */
export const ARRIVAL_WAIT_MS = 2000;
export const MAX_WAIT_MS = 30_000;
/** How often a long-polling fetch looks again for a queue that did not exist when it came. */
const MISSING_RETRY_MS = 500;
/**
 * `POST /ojs/v1/workers/fetch` `{ queues | pool, strategy?, weights?, count?, worker_id?,
 * visibility_timeout_ms?, wait_ms? }`: claims up to `count` jobs from the queues, in their order,
 * or spread over them by a queue pool's strategy or the worker's (fetch-plan.ts); 200 `{ jobs }`
 * (empty when none).
 */
export async function fetchJobs(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const body = object(await readJsonValue(request.req, MAX_PUSH_BYTES, 'INVALID_REQUEST'));
  const plan = await fetchPlanOf(ctx, body, request);
  const count = integer(body.count ?? body.max_jobs, 'count', 1, REMOTE_CONCURRENCY) ?? DEFAULT_FETCH_COUNT;
  const asked = integer(body.visibility_timeout_ms, 'visibility_timeout_ms', ...VISIBILITY_RANGE_MS);
  // The fetch's own, else the one the job was pushed with here, else the default.
  const visibilityMs = (job: Job): number => asked ?? ctx.envelopes.get(job.id)?.visibilityMs ?? DEFAULT_VISIBILITY_MS;
  const waitMs = integer(body.wait_ms, 'wait_ms', 0, MAX_WAIT_MS);
  const worker = typeof body.worker_id === 'string' && body.worker_id !== '' ? body.worker_id : 'anonymous';
  // A worker told to quiet or terminate gets nothing more (it should not ask: worker protocol 6).
  if (ctx.workers.seen(worker, confinedTo(request)) !== 'running') return { status: 200, body: { jobs: [] } };
  const config = await ctx.admin.configFile.load();
  const tenant = tenantOf(request);
  const bounded = confinedTo(request);
  const wanted = plan.queues.map((queue) => ({
    queue,
    tenant: ctx.remote.tenantFor(config, queue, tenant, bounded !== undefined),
  }));
  // A queue that does not exist yet is served once a push has made it (tried again while waiting).
  let served: RemoteQueue[] = [];
  let missing = wanted;
  const serveMissing = async (): Promise<void> => {
    const started = await Promise.all(missing.map((want) => ctx.remote.serve(want.queue, want.tenant, bounded)));
    missing = missing.filter((_, i) => started[i] === undefined);
    const byQueue = new Map([...served, ...started.filter((remote) => remote !== undefined)].map((remote) => [remote.queue, remote]));
    served = wanted.flatMap((want) => byQueue.get(want.queue) ?? []);
  };
  await serveMissing();
  const deadline = Date.now() + (waitMs ?? ARRIVAL_WAIT_MS);
  let retried = Date.now();
  for (;;) {
    if (missing.length > 0 && waitMs !== undefined && Date.now() - retried >= MISSING_RETRY_MS) {
      retried = Date.now();
      await serveMissing();
    }
    // The plan is kept: while a queue whose turn may come has jobs on their way, they are waited
    // for rather than another queue's taken (within the deadline).
    const coming = await comingFor(ctx, plan, served);
    if (coming === undefined || Date.now() >= deadline) {
      const taken = claimPlanned(ctx, plan, served, count, worker, visibilityMs);
      ctx.workers.claimed(
        worker,
        taken.map((held) => held.job.id),
      );
      // `wait_ms` (long-poll): nothing anywhere yet, wait for an arrival.
      if (taken.length > 0 || waitMs === undefined || Date.now() >= deadline) {
        const views = taken.map((held) => ({ ...claimedView(ctx, held), id: shownIdOf(ctx, request, held.job.id) }));
        return { status: 200, body: { jobs: views } };
      }
    }
    await ctx.board.arrival(Math.min(100, Math.max(0, deadline - Date.now())));
  }
}

/** `POST /ojs/v1/workers/ack` `{ job_id, result?, emit? }`: the job completes, its emits confirmed first; 200 with its state. */
export async function ackJob(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const body = object(await readJsonValue(request.req, MAX_PUSH_BYTES, 'INVALID_REQUEST'));
  const { held, asked } = await claimOf(ctx, request, body.job_id ?? body.id);
  if (body.emit !== undefined && !Array.isArray(body.emit)) throw new ApiError(400, 'INVALID_REQUEST', '"emit" must be an array of jobs');
  const local = ctx.settlements.wait(held.job.id, held.job.attempt, held.claim?.at, undefined, held.ctx);
  await ctx.board.ack(held, body as AckBody);
  return settled(ctx, held, asked, local);
}

/**
 * `POST /ojs/v1/workers/nack` `{ job_id, error: { code?, message, retryable? }, requeue? }`: retried
 * on the ladder or dead-lettered; with `requeue: true` (openapi.yaml NackRequest) handed back at
 * once, same attempt, whatever the error says. 200 with its state.
 */
export async function nackJob(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const body = object(await readJsonValue(request.req, MAX_PUSH_BYTES, 'INVALID_REQUEST'));
  const { held, asked } = await claimOf(ctx, request, body.job_id ?? body.id);
  if (body.requeue !== undefined && typeof body.requeue !== 'boolean')
    throw new ApiError(400, 'INVALID_REQUEST', '"requeue" must be a boolean');
  const local = ctx.settlements.wait(held.job.id, held.job.attempt, held.claim?.at, undefined, held.ctx);
  if (body.requeue === true) ctx.board.requeue(held);
  else ctx.board.nack(held, (typeof body.error === 'object' && body.error !== null ? body.error : {}) as NackError);
  return settled(ctx, held, asked, local);
}

/**
 * `POST /ojs/v1/workers/heartbeat` `{ worker_id, active_jobs?, visibility_timeout_ms? }`: extends
 * the worker's claims; answers the state wanted of it (`running`, or an operator's `quiet` /
 * `terminate`), also as `directive` (openapi.yaml: empty while running).
 */
export async function heartbeat(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const body = object(await readJsonValue(request.req, MAX_PUSH_BYTES, 'INVALID_REQUEST'));
  const worker = typeof body.worker_id === 'string' && body.worker_id !== '' ? body.worker_id : 'anonymous';
  // The worker protocol names the ids `active_job_ids` (`active_jobs` its count); openapi.yaml, `active_jobs`.
  const listed = Array.isArray(body.active_job_ids) ? body.active_job_ids : body.active_jobs;
  const named = Array.isArray(listed) ? listed.filter((id): id is string => typeof id === 'string') : undefined;
  // Each as the worker's tenant names it (tenant-job-ids.ts), and shown back so.
  const shown = new Map(named?.map((id) => [heldIdOf(ctx, request, id), id]));
  const ids = named === undefined ? undefined : [...shown.keys()];
  const visibilityMs = integer(body.visibility_timeout_ms, 'visibility_timeout_ms', ...VISIBILITY_RANGE_MS);
  const state = ctx.workers.seen(worker, confinedTo(request), ids?.length ?? activeCount(body));
  const extended = ctx.board
    .heartbeat(worker, ids, visibilityMs, confinedTo(request))
    .map((id) => shown.get(id) ?? shownIdOf(ctx, request, id));
  const directive = state === 'running' ? '' : state;
  return { status: 200, body: { state, directive, jobs_extended: extended, server_time: new Date().toISOString() } };
}

/**
 * The claim a worker settles, and the id the worker named it by; 404 for a job no one knows, 409
 * for one not claimed here (waiting, or ended).
 */
async function claimOf(ctx: BindingContext, request: ApiRequest, asked: unknown): Promise<{ held: Held; asked: string }> {
  if (typeof asked !== 'string' || asked === '') throw new ApiError(400, 'INVALID_REQUEST', '"job_id" must be a job id');
  const id = await jobIdOf(ctx, request, asked);
  const held = ctx.board.claimOf(id);
  if (held !== undefined) {
    checkVisible(request, asked, held.job.tenant);
    return { held, asked };
  }
  const row = await visibleJobs(await ctx.admin.jobs(), request).get(id);
  if (row === undefined && !ctx.envelopes.has(id)) throw new ApiError(404, 'NOT_FOUND', `no job "${asked}" is known`);
  checkVisible(request, asked, row?.tenant ?? ctx.envelopes.get(id)?.job.tenant);
  throw new ApiError(
    409,
    'CONFLICT',
    `job "${asked}" is not active here: only a job fetched from this server, and not settled, can be acknowledged`,
  );
}

/**
 * The answer to an ack or nack: the job as its runner here settled it (`local`, SettlementWaits),
 * awaited, never polled. When that settlement made no report (its delivery went back to the broker
 * with a lost channel: nothing was settled), the job store's row answers as it stands.
 */
async function settled(ctx: BindingContext, held: Held, asked: string, local: Promise<LocalSettlement | undefined>): Promise<ApiResponse> {
  const here = await local;
  const row: JobRow | undefined = here?.row ?? (await (await ctx.admin.jobs()).get(held.job.id));
  const view = bindingJobView(row, ctx.envelopes.get(held.job.id) ?? { job: held.job, extensions: {} });
  // A retry: when it comes back (kept from the same settlement).
  if (row?.state === 'retryable') Object.assign(view, ctx.retries.fields(held.job.id, row.attempt));
  view.id = asked;
  return { status: 200, body: { acknowledged: true, job_id: asked, ...view, job: view } };
}

export function claimedView(ctx: BindingContext, held: Held): Record<string, unknown> {
  const pushed = ctx.envelopes.get(held.job.id);
  return {
    ...bindingJobView(undefined, {
      job: held.job,
      extensions: pushed?.extensions ?? {},
      ...(pushed?.priority === undefined ? {} : { priority: pushed.priority }),
    }),
    state: 'active',
    attempt: held.job.attempt,
    started_at: held.claim?.at,
    visibility_timeout_ms: held.claim?.visibilityMs,
    // A retry shows the wait that preceded it.
    ...(held.job.attempt > 1 ? { retry_delay_ms: ctx.retries.fields(held.job.id, held.job.attempt).retry_delay_ms } : {}),
  };
}

/** The worker protocol's `active_jobs`, when it is a count. */
function activeCount(body: Record<string, unknown>): number | undefined {
  return Number.isInteger(body.active_jobs) ? (body.active_jobs as number) : undefined;
}

function object(value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ApiError(400, 'INVALID_REQUEST', 'the request body must be a JSON object');
  return value as Record<string, unknown>;
}

function integer(value: unknown, name: string, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || (value as number) < min || (value as number) > max) {
    throw new ApiError(400, 'INVALID_REQUEST', `"${name}" must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return value as number;
}
