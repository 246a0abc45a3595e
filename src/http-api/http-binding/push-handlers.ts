import { ApiError } from '../api-error.js';
import { readJsonValue } from '../request-body.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import { queueFor, settingsFor } from '../../config/queue-resolver.js';
import { QueueFullError, StagecoachError } from '../../errors/errors.js';
import type { Job } from '../../job/job.types.js';
import type { BindingContext } from './binding-context.js';
import { bindingJobView } from './binding-job-view.js';
import { readPushInput, type PushInput } from './push-input.js';
import { confinedTo, tenantOf } from './request-tenant.js';
import { isTaken, keptIdOf, shownIdOf, withKeptParent } from './tenant-job-ids.js';
import { testDirectiveOf } from './worker-directory.js';
import { shownState } from '../../job-state/job-lifecycle.js';
import { asTenantLimit } from './tenant-quota.js';
import { checkBatchRoom, pushPressure, queueFullAnswer } from './queue-pressure.js';

/** The largest push body: arguments above `payloads.threshold` are offloaded (docs/payloads.md), so a job may be large. */
export const MAX_PUSH_BYTES = 16 * 1024 * 1024;
/** Most jobs in one `POST /ojs/v1/jobs/batch`. */
export const MAX_BATCH_JOBS = 1000;

/**
 * `POST /ojs/v1/jobs` (PUSH): 201 `{ job }`, the job as the store knows it (`available` or
 * `scheduled`); a unique job's duplicate ignored (`on_conflict: "ignore"`): 200 `{ job, deduplicated: true }`,
 * the job holding the key (OJS unique jobs 5.4; docs/unique-jobs.md).
 */
export async function pushJob(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const { req } = request;
  const body = await withKeptParent(ctx, request, await readJsonValue(req, MAX_PUSH_BYTES, 'INVALID_PAYLOAD'));
  const input = readPushInput(body, tenantOf(request));
  const { view, deduplicated, pressure } = await push(ctx, input, body, request);
  if (deduplicated) return { status: 200, body: { job: view, deduplicated } };
  return { status: 201, body: { job: view }, headers: { Location: `/ojs/v1/jobs/${encodeURIComponent(String(view.id))}`, ...pressure } };
}

/**
 * `POST /ojs/v1/jobs/batch` `{ jobs: [...] }`: every job is read before any is sent (one bad job
 * refuses the request, naming its index), and a batch that does not fit in a bounded queue's room
 * is refused whole (checkBatchRoom); then they are published in order. 201 `{ jobs, count }`.
 */
export async function pushBatch(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const { req } = request;
  const body = await readJsonValue(req, MAX_PUSH_BYTES, 'INVALID_PAYLOAD');
  const given = (body as { jobs?: unknown } | null)?.jobs;
  if (!Array.isArray(given) || given.length === 0 || given.length > MAX_BATCH_JOBS) {
    throw new ApiError(400, 'INVALID_PAYLOAD', `"jobs" must be an array of 1 to ${MAX_BATCH_JOBS} jobs`);
  }
  const jobs: unknown[] = [];
  for (const job of given) jobs.push(await withKeptParent(ctx, request, job));
  const tenant = tenantOf(request);
  const inputs = jobs.map((job, index) => {
    try {
      return readPushInput(job, tenant);
    } catch (err) {
      throw new ApiError(400, 'INVALID_PAYLOAD', `jobs[${index}]: ${(err as Error).message}`);
    }
  });
  const publisher = await ctx.publisher();
  const batch = inputs.map((input) => ({
    job: publisher.build(input.queue, input.spec),
    headers: input.spec.headers ?? {},
    pending: input.spec.pending === true,
  }));
  // Declared first (as each push would), so that a queue's depth reads 0 rather than unknown.
  const queues = new Map(batch.map(({ job }) => [`${job.queue}\u0000${job.tenant ?? ''}`, job]));
  for (const job of queues.values()) await ctx.remote.declare(job.queue, job.tenant, confinedTo(request));
  await checkBatchRoom(await ctx.admin.configFile.load(), batch, (queue) => publisher.readyMessages(queue));
  const views: unknown[] = [];
  for (const [index, input] of inputs.entries()) {
    const { view, deduplicated } = await push(ctx, input, jobs[index], request);
    views.push(deduplicated ? { ...view, deduplicated } : view);
  }
  return { status: 201, body: { jobs: views, count: views.length } };
}

/**
 * Publishes one job as any producer's (tenant routing, variants, limits, payload offloading,
 * tracking). A tenant's token is bounded in the queues it can create, and the id its client
 * gives is its tenant's own (tenant-job-ids.ts): kept under another, shown back as given.
 * `pressure`: the queue's depth headers once it is near its bound (queue-pressure.ts).
 */
async function push(
  ctx: BindingContext,
  input: PushInput,
  raw: unknown,
  request: ApiRequest,
): Promise<{ view: Record<string, unknown>; deduplicated: boolean; pressure?: Record<string, string> | undefined }> {
  const bounded = confinedTo(request);
  const store = await ctx.admin.jobs();
  if (input.derived === true && input.id !== undefined) {
    // The same parent and key again (its run is run again): the first push's job is the answer.
    // Pushes of one id at once are taken one after the other, so only the first publishes.
    const id = input.id;
    return ctx.pushing.serialize(id, async () => {
      const row = await store.get(id);
      const pushed = ctx.envelopes.get(id);
      if (row === undefined && pushed === undefined) return push(ctx, { ...input, derived: false }, raw, request);
      return { view: bindingJobView(row, pushed), deduplicated: true };
    });
  }
  // A derived id (`derived: false` here, once found new) is its tenant's already, as childJobId
  // hashes the tenant in: kept as it is.
  const kept = input.id === undefined ? undefined : input.derived === false ? input.id : keptIdOf(request, input.id);
  if (input.id !== undefined && kept !== undefined && (await isTaken(ctx, request, input.id, kept))) {
    throw new StagecoachError('DUPLICATE', `a job with id "${input.id}" exists`);
  }
  const clientId = kept === input.id ? undefined : input.id;
  const publisher = await ctx.publisher();
  const built = publisher.build(input.queue, input.spec);
  // Its queue must exist before it is sent, or it would be unroutable until a worker fetched.
  await ctx.remote.declare(built.queue, built.tenant, bounded);
  // Extensions ride on the envelope (OJS core: unknown fields are preserved end to end).
  const job: Job = { ...input.extensions, ...built, ...(kept === undefined ? {} : { id: kept }) };
  // Listening before the push: its `job.enqueued` is in GET /ojs/v1/events.
  await ctx.events.listen();
  const readDepth = (queue: string): Promise<number | undefined> => publisher.readyMessages(queue);
  const sent = await publisher.send(job, input.spec).catch(async (err: unknown) => {
    if (!(err instanceof QueueFullError)) throw err;
    const config = await ctx.admin.configFile.load();
    // A tenant's own full queue is its quota reached (TENANT_LIMIT_EXCEEDED), not the queue's bound.
    const quota = asTenantLimit(err, config);
    throw quota !== err ? quota : await queueFullAnswer(config, err, readDepth);
  });
  if (sent !== job.id) {
    const holder = await store.get(sent);
    const id = shownIdOf(ctx, request, sent);
    return { view: { id, type: job.type, state: holder === undefined ? 'available' : shownState(holder) }, deduplicated: true };
  }
  const config = await ctx.admin.configFile.load();
  const maxAttempts = job.retry?.max_attempts ?? queueFor(config, job.queue).default_retry.max_attempts;
  if (settingsFor(config, job.queue, job.tenant).events) {
    // Information about the push, after it: never awaited, at most once (as the stages' job events).
    void ctx.publishEvent('job.enqueued', job.id, {
      job_type: job.type,
      queue: job.queue,
      ...(job.tenant === undefined ? {} : { tenant: job.tenant }),
      ...(job.scheduled_at === undefined ? {} : { scheduled_at: job.scheduled_at }),
    });
  }
  const pushed = {
    job,
    ...(clientId === undefined ? {} : { clientId }),
    extensions: input.extensions,
    maxAttempts,
    ...(input.priority === undefined ? {} : { priority: input.priority }),
    ...(input.visibilityMs === undefined ? {} : { visibilityMs: input.visibilityMs }),
    ...(input.spec.pending === true ? { pending: true } : {}),
  };
  ctx.envelopes.add(pushed);
  const directive = ctx.testReset ? testDirectiveOf(raw) : undefined;
  if (directive !== undefined) ctx.workers.orderClaimerOf(job.id, directive);
  const pressure = await pushPressure(config, { job, headers: input.spec.headers ?? {}, pending: input.spec.pending === true }, readDepth);
  const view = bindingJobView(await (await ctx.admin.jobs()).get(job.id), pushed);
  return { view: { ...view, id: clientId ?? job.id }, deduplicated: false, pressure };
}
