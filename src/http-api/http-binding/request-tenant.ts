import type { JobStore } from '../../job-state/job-store.js';
import { ApiError } from '../api-error.js';
import type { ApiRequest } from '../router.js';

/** The header naming the tenant a request acts for (spec/ojs-multi-tenancy.md). */
export const TENANT_HEADER = 'x-ojs-tenant';

/**
 * The tenant a request acts for: a tenant token's own (an `X-OJS-Tenant` naming another is
 * refused), else the header's (the admin acting for a tenant), else none.
 */
export function tenantOf(request: ApiRequest): string | undefined {
  const value = request.req.headers[TENANT_HEADER];
  const raw = Array.isArray(value) ? value[0] : value;
  const header = raw === undefined || raw.trim() === '' ? undefined : raw.trim();
  const caller = request.caller;
  if (caller?.kind !== 'tenant') return header;
  if (header !== undefined && header !== caller.tenant) {
    throw new ApiError(403, 'UNAUTHORIZED', `this token acts for tenant "${caller.tenant}" only, not "${header}"`);
  }
  return caller.tenant;
}

/**
 * Refuses (403) a tenant's token that names another tenant in `X-OJS-Tenant`, on every route,
 * before the handler runs: no route answers a confined caller about another tenant.
 */
export function checkTenantHeader(request: ApiRequest): void {
  tenantOf(request);
}

/** The tenant a tenant token confines the request to; undefined for the admin. */
export function confinedTo(request: ApiRequest): string | undefined {
  return request.caller?.kind === 'tenant' ? request.caller.tenant : undefined;
}

/**
 * Refuses a job outside the caller's tenant as if it did not exist (404: a tenant learns nothing
 * of another's jobs, not even that an id is taken).
 */
export function checkVisible(request: ApiRequest, id: string, jobTenant: string | undefined): void {
  const tenant = confinedTo(request);
  if (tenant !== undefined && jobTenant !== tenant) throw new ApiError(404, 'NOT_FOUND', `no job "${id}" is known`);
}

/**
 * `?tenant=` as a confined caller may ask it: its own tenant or none (which then means its own);
 * another tenant's name is refused as `X-OJS-Tenant` is. The admin and viewers ask what they like.
 */
export function tenantFilterOf(request: ApiRequest, asked: string | undefined): string | undefined {
  const tenant = confinedTo(request);
  if (tenant === undefined) return asked;
  if (asked !== undefined && asked !== tenant)
    throw new ApiError(403, 'UNAUTHORIZED', `this token acts for tenant "${tenant}" only, not "${asked}"`);
  return tenant;
}

/**
 * The job store as the request's caller may see it: a tenant's token reads its own tenant's jobs
 * only (another's is absent, as if it did not exist, and lists are filtered to its tenant). Every
 * handler a tenant can reach reads jobs through it, so confinement does not depend on each
 * handler remembering to check.
 */
export function visibleJobs(store: JobStore, request: ApiRequest): Pick<JobStore, 'get' | 'list'> {
  const tenant = confinedTo(request);
  if (tenant === undefined) return store;
  return {
    get: async (id) => {
      const row = await store.get(id);
      return row?.tenant === tenant ? row : undefined;
    },
    list: (filter, page) => store.list({ ...filter, tenant: tenantFilterOf(request, filter.tenant) }, page),
  };
}
