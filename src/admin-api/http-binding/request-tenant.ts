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
