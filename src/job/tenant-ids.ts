import { createHash } from 'node:crypto';

/**
 * The id under which stagecoach keeps a job whose own id a tenant's client chose (docs/security.md,
 * "Job ids are per tenant"): the same client id from two tenants names two jobs, and neither
 * tenant can learn that the other uses it. Derived, never drawn, so the same (tenant, id) always
 * names the same job: a push of it again is recognised as a duplicate of that tenant's own.
 *
 * Shaped as a UUIDv7 (RFC 9562 5.7) with the client id's time, so the job store still lists jobs
 * in creation order and OJS tools that check ids take it; the other 74 bits come from a SHA-256 of
 * the tenant and the client's id. Not reversible: finding a client id whose kept id equals
 * another tenant's is a preimage of 74 bits of SHA-256, so no tenant can aim at another's job.
 */
export function tenantJobId(tenant: string, clientId: string): string {
  const hash = createHash('sha256').update(`stagecoach.job-id\u0000${tenant}\u0000${clientId}`).digest();
  const bytes = Buffer.alloc(16);
  const time = /^[0-9a-f]{8}-[0-9a-f]{4}-7/.test(clientId) ? clientId.replace(/-/g, '').slice(0, 12) : undefined;
  if (time !== undefined) bytes.write(time, 0, 6, 'hex');
  hash.copy(bytes, 6, 0, 10);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x70; // version 7
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The id under which stagecoach keeps a workflow whose id a tenant's client chose: `<tenant>:<id>`
 * (a batch id may hold `:`, a tenant slug never does), so two tenants' same id names two
 * workflows, and the kept id reads back as the tenant's with clientWorkflowId.
 */
export function tenantWorkflowId(tenant: string, clientId: string): string {
  return `${tenant}:${clientId}`;
}

/** The id a tenant gave the workflow kept under `kept`, or `kept` for a workflow whose id it did not choose. */
export function clientWorkflowId(tenant: string, kept: string): string {
  return kept.startsWith(`${tenant}:`) ? kept.slice(tenant.length + 1) : kept;
}
