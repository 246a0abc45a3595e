import type { IncomingMessage } from 'node:http';

/** The header naming the tenant a request acts for (spec/ojs-multi-tenancy.md). */
export const TENANT_HEADER = 'x-ojs-tenant';

/** The tenant a request acts for: its `X-OJS-Tenant`, or none. */
export function tenantOf(req: IncomingMessage): string | undefined {
  const value = req.headers[TENANT_HEADER];
  const tenant = Array.isArray(value) ? value[0] : value;
  return tenant === undefined || tenant.trim() === '' ? undefined : tenant.trim();
}
