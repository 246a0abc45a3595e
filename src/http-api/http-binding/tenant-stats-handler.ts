import { ApiError } from '../api-error.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import { isTenantSlug, notATenantSlug } from '../../util/tenant-slug.js';
import type { BindingContext } from './binding-context.js';
import { countJobs } from './queue-stats-handler.js';
import { confinedTo } from './request-tenant.js';

/**
 * `GET /ojs/v1/admin/tenants/{id}/stats` (ojs-multi-tenancy): the tenant's tracked jobs by state,
 * over every queue, as `GET /ojs/v1/queues/{name}/stats` counts them, with `total_jobs`. The admin
 * (and a viewer) asks for any tenant; a tenant's token for its own only: another tenant's is 404,
 * as if it did not exist.
 */
export async function tenantStats(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const tenant = request.params.id ?? '';
  if (!isTenantSlug(tenant)) throw new ApiError(400, 'INVALID_REQUEST', `tenant: ${notATenantSlug(tenant)}`);
  const confined = confinedTo(request);
  if (confined !== undefined && confined !== tenant) throw new ApiError(404, 'NOT_FOUND', `no tenant "${tenant}" is known`);
  const counts = await countJobs(ctx, request, { tenant });
  const { depth, created_at: createdAt, updated_at: updatedAt, ...states } = counts;
  const totalJobs = Object.entries(states)
    .filter(([state]) => !state.endsWith('_today'))
    .reduce((sum, [, n]) => sum + (n as number), 0);
  return {
    status: 200,
    body: {
      tenant_id: tenant,
      total_jobs: totalJobs,
      depth,
      ...states,
      created_at: createdAt,
      updated_at: updatedAt,
      computed_at: new Date().toISOString(),
    },
  };
}
