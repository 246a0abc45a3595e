import { ApiError } from '../api-error.js';
import { readJsonValue, MAX_BODY_BYTES } from '../request-body.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import { checkScheduleTarget, compileSchedule } from '../../config/compile-schedule.js';
import { queueFor } from '../../config/queue-resolver.js';
import { validateRetryPolicy } from '../../retry/retry-policy.js';
import type { BookEntry } from '../../schedule/schedule-book.js';
import { scheduleKey, scheduleRecord } from '../../schedule/schedule-records.js';
import { listedEntries, scheduleView } from '../../schedule/schedule-views.js';
import type { BindingContext } from './binding-context.js';
import { readCronInput } from './cron-input.js';
import { tenantOf } from './request-tenant.js';

/**
 * The binding's cron endpoints (spec/ojs-http-binding.md section 13, spec/ojs-cron.md section 8,
 * openapi.yaml; docs/schedules.md): the registrations live in the schedules stream, so every
 * process sees them and they survive restarts; the scheduler's leader fires them.
 *
 * A tenant's token registers, sees and changes its own tenant's schedules only (they fire for that
 * tenant alone); another tenant's is 404 to it. The admin sees every schedule, or one tenant's
 * with `X-OJS-Tenant`.
 */

/** `GET /ojs/v1/cron[?enabled=true|false]`: `{ crons, count }` (openapi's names). */
export async function listCrons(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const tenant = tenantOf(request);
  const enabled = request.query.get('enabled');
  if (enabled !== null && enabled !== 'true' && enabled !== 'false')
    throw new ApiError(400, 'INVALID_REQUEST', '"enabled" must be true or false');
  const [book, config] = await Promise.all([ctx.admin.schedules.book(), ctx.admin.configFile.load()]);
  const crons = listedEntries(book, config)
    .filter((entry) => tenant === undefined || entry.schedule.owner === tenant)
    .filter((entry) => enabled === null || String(entry.enabled) === enabled)
    .map((entry) => scheduleView(entry, config));
  return { status: 200, body: { crons, count: crons.length } };
}

/** `GET /ojs/v1/cron/{name}`: `{ cron }`; 404 when the caller has none of that name. */
export async function getCron(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const entry = await entryOf(ctx, request);
  return { status: 200, body: { cron: scheduleView(entry, await ctx.admin.configFile.load()) } };
}

/**
 * `POST /ojs/v1/cron`: registers or updates (OJS cron 8.1: upsert; 201 new, 200 updated). The
 * expression, zone and job are checked first: 400 `invalid_request` with the reason. A schedule
 * of the configuration file is changed there, not here (409).
 */
export async function registerCron(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const owner = tenantOf(request);
  const { name, schedule: raw } = readCronInput(await readJsonValue(request.req, MAX_BODY_BYTES, 'INVALID_REQUEST'));
  const schedule = compileSchedule(name, raw, 'cron', owner);
  validateRetryPolicy(schedule.retry, 'cron.retry');
  const config = await ctx.admin.configFile.load();
  checkScheduleTarget(config, schedule, 'cron');
  if (owner === undefined && config.schedules.has(name)) {
    throw new ApiError(409, 'CONFLICT', `cron "${name}" is defined in the configuration file (schedules.${name}): change it there`);
  }
  // Its queue exists before its first occurrence, as a push's does: a shared queue, or the owner's.
  const queue = queueFor(config, schedule.queue, `cron "${name}"`);
  if (queue.scope === 'shared' || owner !== undefined)
    await ctx.remote.declare(schedule.queue, queue.scope === 'shared' ? undefined : owner);
  const key = scheduleKey(schedule);
  const existed = (await ctx.admin.schedules.book()).entries.has(key);
  const book = await ctx.admin.schedules.append(scheduleRecord({ kind: 'put', schedule, origin: 'api' }));
  const entry = book.entries.get(key) as BookEntry;
  return { status: existed ? 200 : 201, body: { cron: scheduleView(entry, config) } };
}

/** `DELETE /ojs/v1/cron/{name}`: `{ cron, deleted: true, name }` (both shapes); jobs it enqueued stay. */
export async function deleteCron(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const entry = await entryOf(ctx, request);
  refuseConfigured(entry, 'remove');
  const config = await ctx.admin.configFile.load();
  const view = scheduleView(entry, config);
  await ctx.admin.schedules.append(scheduleRecord({ kind: 'remove', key: entry.key }));
  return { status: 200, body: { cron: view, deleted: true, name: entry.schedule.name } };
}

/** `PATCH /ojs/v1/cron/{name}` `{ enabled }` (OJS cron 8.5): `{ cron }`, `next_run_at` null while disabled. */
export async function toggleCron(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const body = await readJsonValue(request.req, MAX_BODY_BYTES, 'INVALID_REQUEST');
  const enabled = (body as { enabled?: unknown } | null)?.enabled;
  if (typeof enabled !== 'boolean') throw new ApiError(400, 'INVALID_REQUEST', 'the body must be { "enabled": true | false }');
  const entry = await entryOf(ctx, request);
  const book = await ctx.admin.schedules.append(scheduleRecord({ kind: 'toggle', key: entry.key, enabled }));
  return { status: 200, body: { cron: scheduleView(book.entries.get(entry.key) ?? entry, await ctx.admin.configFile.load()) } };
}

/** `POST /ojs/v1/cron/{name}/trigger[?tenant=T]`: fire now, once (stagecoach's; `cron trigger`). 202: the leader fires it. */
export async function triggerCron(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const entry = await entryOf(ctx, request);
  const tenant = entry.schedule.owner ?? request.query.get('tenant') ?? undefined;
  const record = scheduleRecord({ kind: 'trigger', key: entry.key, ...(tenant === undefined ? {} : { tenant }) });
  await ctx.admin.schedules.append(record);
  return { status: 202, body: { cron: entry.schedule.name, trigger: record.id, ...(tenant === undefined ? {} : { tenant }) } };
}

/** The caller's schedule of the path's name, or 404 (another tenant's is not found either). */
async function entryOf(ctx: BindingContext, request: ApiRequest): Promise<BookEntry> {
  const name = request.params.name as string;
  const owner = tenantOf(request);
  const entry = (await ctx.admin.schedules.book()).entries.get(scheduleKey({ name, ...(owner === undefined ? {} : { owner }) }));
  if (entry === undefined)
    throw new ApiError(404, 'NOT_FOUND', `no cron job "${name}"${owner === undefined ? '' : ` of tenant "${owner}"`}`);
  return entry;
}

function refuseConfigured(entry: BookEntry, what: string): void {
  if (entry.origin === 'config') {
    throw new ApiError(409, 'CONFLICT', `cron "${entry.schedule.name}" is defined in the configuration file: ${what} it there`);
  }
}
