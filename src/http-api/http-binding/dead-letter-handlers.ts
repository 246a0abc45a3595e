import { deleteDeadLetters, listDeadLetterJobs, retryDeadLetters, type DeadLetterJob } from '../../dead-letters/dead-letter-actions.js';
import type { CompiledConfig } from '../../config/config.types.js';
import { ENDED_STATES } from '../../job-state/job-lifecycle.js';
import { managementClientOf } from '../../broker-management/management-client.js';
import { vhostOfAmqpUrl } from '../../security/broker-users.js';
import { ApiError } from '../api-error.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import type { BindingContext } from './binding-context.js';
import { bindingJobView } from './binding-job-view.js';
import { parseBrokerName } from '../../topology/names.js';
import { confinedTo, tenantOf } from './request-tenant.js';
import { shownIdOf } from './tenant-job-ids.js';
import { tenantJobId } from '../../job/tenant-ids.js';

/** Dead letters one request reads per dead-letter queue at most (a listing's `total` counts no further). */
export const DEAD_LETTER_READ_MAX = 1000;
/** A listing's page: `limit` defaults to this, at most DEAD_LETTER_PAGE_MAX (spec/ojs-http-binding.md 12.1). */
export const DEAD_LETTER_PAGE = 50;
export const DEAD_LETTER_PAGE_MAX = 100;
/** How long a retry waits for the job store to show the job waiting again. */
const STORE_WAIT_MS = 3000;

/** A dead-letter queue on the broker: the logical queue it belongs to, and its tenant (none for a shared queue's). */
interface DeadOrigin {
  queue: string;
  tenant?: string;
}

/**
 * `GET /ojs/v1/dead-letter?queue=&limit=&offset=`: the dead letters of the prefix's dead-letter
 * queues (`<prefix>.dead.<queue>[.<tenant>]`, read without consuming them, as `stagecoach dead
 * list` reads them), those of the request's tenant only when it acts for one; 200 `{ jobs,
 * pagination }`, each job as INFO shows it (`state: discarded`, its errors).
 */
export async function listDeadLetter(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const limit = intParam(request, 'limit', 1, DEAD_LETTER_PAGE_MAX) ?? DEAD_LETTER_PAGE;
  const offset = intParam(request, 'offset', 0, Number.MAX_SAFE_INTEGER) ?? 0;
  const found = await deadLetters(ctx, request, request.query.get('queue') ?? undefined);
  const jobs = await Promise.all(
    found
      .slice(offset, offset + limit)
      .map(async (found) => ({ ...(await deadView(ctx, found.origin, found.entry)), id: shownIdOf(ctx, request, found.entry.id ?? '') })),
  );
  return { status: 200, body: { jobs, pagination: { total: found.length, limit, offset, has_more: offset + limit < found.length } } };
}

/**
 * `POST /ojs/v1/dead-letter/{id}/retry`: the job goes back to its queue with a fresh attempt count
 * (`stagecoach dead retry`'s mechanism, for this job only); 200 `{ job }`, `available`, attempt 0.
 */
export async function retryDeadLetter(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const { origin, entry, asked } = await findDeadLetter(ctx, request);
  const config = await ctx.admin.configFile.load();
  const result = await retryDeadLetters(config, origin.queue, origin.tenant, ctx.admin.log, { ids: new Set([entry.id as string]) });
  if (result.retried === 0) {
    throw result.kept > 0
      ? new ApiError(409, 'CONFLICT', `dead letter "${entry.id}" cannot be sent back (see the server log)`)
      : new ApiError(404, 'NOT_FOUND', `no dead letter "${entry.id}" (taken meanwhile)`);
  }
  await storeShowsWaiting(ctx, entry.id as string);
  const job = entry.job === undefined ? undefined : { ...entry.job, queue: origin.queue, attempt: 1 };
  const view = bindingJobView(undefined, job === undefined ? undefined : { job, extensions: ctx.envelopes.get(job.id)?.extensions ?? {} });
  return { status: 200, body: { job: { ...view, id: asked, state: 'available', attempt: 0, re_enqueued_at: new Date().toISOString() } } };
}

/** `DELETE /ojs/v1/dead-letter/{id}`: the dead letter is dropped for good; 200 `{ deleted: true, job_id }`. */
export async function deleteDeadLetter(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const { origin, entry, asked } = await findDeadLetter(ctx, request);
  const config = await ctx.admin.configFile.load();
  const deleted = await deleteDeadLetters(config, origin.queue, origin.tenant, new Set([entry.id as string]), ctx.admin.log);
  if (deleted.length === 0) throw new ApiError(404, 'NOT_FOUND', `no dead letter "${entry.id}" (taken meanwhile)`);
  return { status: 200, body: { deleted: true, job_id: asked } };
}

/** The dead letter the path names: the request's tenant's own job of that id first (tenant-job-ids.ts), else the id as kept. */
async function findDeadLetter(
  ctx: BindingContext,
  request: ApiRequest,
): Promise<{ origin: DeadOrigin; entry: DeadLetterJob; asked: string }> {
  const asked = request.params.id ?? '';
  const tenant = tenantOf(request);
  const own = tenant === undefined ? undefined : tenantJobId(tenant, asked);
  const all = (await deadLetters(ctx, request, undefined)).filter(({ entry }) => entry.isJob);
  const found = all.find(({ entry }) => entry.id === own) ?? all.find(({ entry }) => entry.id === asked);
  // Another tenant's dead letter is not found either (deadLetters reads the request's tenant's only).
  if (found === undefined) throw new ApiError(404, 'NOT_FOUND', `no dead letter "${asked}"`);
  return { ...found, asked };
}

/** The dead letters the request may see, oldest first within each dead-letter queue, queues by name. */
async function deadLetters(
  ctx: BindingContext,
  request: ApiRequest,
  queue: string | undefined,
): Promise<Array<{ origin: DeadOrigin; entry: DeadLetterJob }>> {
  const config = await ctx.admin.configFile.load();
  const tenant = tenantOf(request);
  const confined = confinedTo(request);
  const origins = (await deadOrigins(config)).filter(
    (origin) =>
      (queue === undefined || origin.queue === queue) && (tenant === undefined || origin.tenant === undefined || origin.tenant === tenant),
  );
  const found: Array<{ origin: DeadOrigin; entry: DeadLetterJob }> = [];
  for (const origin of origins) {
    let entries: DeadLetterJob[];
    try {
      entries = await listDeadLetterJobs(config, origin.queue, origin.tenant, ctx.admin.log, DEAD_LETTER_READ_MAX, ctx.admin.payloads);
    } catch (err) {
      // A dead-letter queue the configuration no longer resolves to (its queue's scope changed): `stagecoach dead` reads it.
      ctx.admin.log.warn('dead-letter queue not read', { queue: origin.queue, tenant: origin.tenant, err: (err as Error).message });
      continue;
    }
    for (const entry of entries) {
      // A shared queue's dead letters are every tenant's: a tenant sees its own (the admin acting for one, too).
      if (origin.tenant === undefined && tenant !== undefined && entry.tenant !== tenant) continue;
      if (confined !== undefined && (entry.tenant ?? origin.tenant) !== confined) continue;
      found.push({ origin, entry });
    }
  }
  return found;
}

/** The prefix's dead-letter queues on the broker, by name. */
async function deadOrigins(config: CompiledConfig): Promise<DeadOrigin[]> {
  const start = `${config.prefix}.dead.`;
  const queues = await managementClientOf(config).listQueues(vhostOfAmqpUrl(config.broker.url));
  return queues
    .map((queue) => queue.name)
    .filter((name) => name.startsWith(start))
    .sort()
    .map((name) => {
      // `<queue word>` or `<queue word>.<tenant>` (parseBrokerName reads a dotted queue's word back).
      const parsed = parseBrokerName(config.prefix, name);
      const queue = parsed?.queue ?? name.slice(start.length);
      return parsed?.tenant === undefined ? { queue } : { queue, tenant: parsed.tenant };
    });
}

/** A dead letter as the binding shows it: INFO's view, `discarded`, with its errors (the store's, else the dead letter's own). */
async function deadView(ctx: BindingContext, origin: DeadOrigin, entry: DeadLetterJob): Promise<Record<string, unknown>> {
  const id = entry.id ?? '';
  const row = await (await ctx.admin.jobs()).get(id);
  const job = entry.job === undefined ? undefined : { ...entry.job, queue: origin.queue };
  const view = bindingJobView(row, job === undefined ? undefined : { job, extensions: ctx.envelopes.get(id)?.extensions ?? {} });
  view.id ??= id;
  view.type ??= entry.type;
  view.queue = origin.queue;
  view.state = 'discarded';
  if (entry.attempt !== undefined) view.attempt = entry.attempt;
  if (!Array.isArray(view.errors) && entry.errorType !== undefined) {
    const error = {
      code: entry.errorType,
      type: entry.errorType,
      message: entry.errorMessage ?? '',
      attempt: entry.attempt,
      occurred_at: entry.deadLetteredAt,
    };
    view.errors = [error];
    view.error = error;
  }
  if (entry.deadLetteredAt !== undefined) view.discarded_at ??= entry.deadLetteredAt;
  return view;
}

/**
 * Waits (bounded) for the job store to show a retried dead letter waiting again: the retry
 * reports it before sending it, and an INFO right after the answer should see it so.
 */
async function storeShowsWaiting(ctx: BindingContext, id: string): Promise<void> {
  const deadline = Date.now() + STORE_WAIT_MS;
  while (Date.now() < deadline) {
    const row = await (await ctx.admin.jobs()).get(id);
    if (row === undefined || !ENDED_STATES.has(row.state)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function intParam(request: ApiRequest, name: string, min: number, max: number): number | undefined {
  const raw = request.query.get(name);
  if (raw === null || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ApiError(400, 'INVALID_REQUEST', `"${name}" must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}
