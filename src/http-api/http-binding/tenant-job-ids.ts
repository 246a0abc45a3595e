import { tenantJobId } from '../../job/tenant-ids.js';
import type { ApiRequest } from '../router.js';
import type { BindingContext } from './binding-context.js';
import { confinedTo, tenantOf } from './request-tenant.js';

/**
 * Job ids as the binding's callers name them (docs/security.md, "Job ids are per tenant"). A job
 * id a tenant's token chooses is that tenant's own: the job is kept as tenantJobId(tenant, id),
 * and the tenant's requests naming the id reach that job and show the id back as it was given.
 * An id the server drew, or the admin gave, is kept as it is and reached as it is (confined by
 * checkVisible as every job is). So the same id from two tenants names two jobs, and no answer to
 * a tenant depends on whether another tenant uses an id.
 *
 * The admin's id space is the kept ids: `GET /ojs/v1/jobs` and the admin see a tenant's own ids
 * in their kept form; the admin acting for a tenant (`X-OJS-Tenant`) names jobs as the tenant does.
 */

/** What this server and the job store know of the job kept under `id`, or undefined for none. */
async function holderOf(ctx: BindingContext, id: string): Promise<{ tenant: string | undefined } | undefined> {
  const held = ctx.board.claimOf(id) ?? ctx.envelopes.get(id);
  if (held !== undefined) return { tenant: held.job.tenant };
  const row = await (await ctx.admin.jobs()).get(id);
  return row === undefined ? undefined : { tenant: row.tenant };
}

/** The id a push keeps for the client's own `id`: its tenant's own for a tenant's token, as given for the admin. */
export function keptIdOf(request: ApiRequest, clientId: string): string {
  const tenant = confinedTo(request);
  return tenant === undefined ? clientId : tenantJobId(tenant, clientId);
}

/**
 * Whether pushing the client's `id` (kept as `kept`) reuses an id of the request's own: a job kept
 * under `kept`, or under the id as given when it is the same tenant's (or, for the admin acting for
 * no tenant, anyone's). Another tenant's job never counts: that it exists is not told.
 */
export async function isTaken(ctx: BindingContext, request: ApiRequest, clientId: string, kept: string): Promise<boolean> {
  if ((await holderOf(ctx, kept)) !== undefined) return true;
  const tenant = tenantOf(request);
  if (tenant !== undefined && kept === clientId && (await holderOf(ctx, tenantJobId(tenant, clientId))) !== undefined) return true;
  if (kept === clientId) return false;
  const plain = await holderOf(ctx, clientId);
  return plain !== undefined && plain.tenant === tenant;
}

/**
 * The kept id of the job a request's `id` names: the request's tenant's own job of that id when
 * there is one, else the id as given (whose job, if another tenant's, the caller's confinement
 * answers 404 as for an unknown one).
 */
export async function jobIdOf(ctx: BindingContext, request: ApiRequest, id: string): Promise<string> {
  const tenant = tenantOf(request);
  if (tenant === undefined || id === '') return id;
  const own = tenantJobId(tenant, id);
  return (await holderOf(ctx, own)) === undefined ? id : own;
}

/** jobIdOf for the jobs held here for workers only (a heartbeat's ids): synchronous, the claim board's. */
export function heldIdOf(ctx: BindingContext, request: ApiRequest, id: string): string {
  const tenant = tenantOf(request);
  if (tenant === undefined) return id;
  const own = tenantJobId(tenant, id);
  return ctx.board.claimOf(own) === undefined ? id : own;
}

/**
 * The id shown to the request's caller for the job kept under `kept`: the client's own id when its
 * tenant's token pushed it here (while this server keeps its envelope), else `kept`.
 */
export function shownIdOf(ctx: BindingContext, request: ApiRequest, kept: string): string {
  const tenant = tenantOf(request);
  const pushed = ctx.envelopes.get(kept);
  return tenant !== undefined && pushed?.clientId !== undefined && pushed.job.tenant === tenant ? pushed.clientId : kept;
}

/**
 * A push body whose `meta.parent_id` names the parent as the request's tenant names it, with the
 * parent's kept id instead: the child's derived id (childJobId) and its place under its parent in
 * the job store then do not depend on which of the parent's ids the worker was shown.
 */
export async function withKeptParent(ctx: BindingContext, request: ApiRequest, body: unknown): Promise<unknown> {
  const meta = (body as { meta?: unknown } | null)?.meta;
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return body;
  const parent = (meta as { parent_id?: unknown }).parent_id;
  if (typeof parent !== 'string' || parent === '' || parent.length > 255) return body;
  const kept = await jobIdOf(ctx, request, parent);
  return kept === parent ? body : { ...(body as object), meta: { ...meta, parent_id: kept } };
}
