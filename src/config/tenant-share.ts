import type { CompiledConfig, TenantConfig, TenantShare } from './config.types.js';

/**
 * A tenant's fair share in a pooled stage process (`run --tenants` / `--all-tenants`): its
 * `weight` among the tenants with work, and its `max_concurrency` cap. Every tenant has one;
 * a slug, or an object without them, gets the default.
 */
export const DEFAULT_TENANT_SHARE: TenantShare = Object.freeze({ weight: 1, maxConcurrency: undefined });

/**
 * The share of each configured tenant, defaults filled in. The values were checked by the
 * schema (weight > 0, max_concurrency an integer >= 1), which names the key when they are not.
 */
export function compileTenantShares(entries: ReadonlyArray<string | TenantConfig>): Map<string, TenantShare> {
  const shares = new Map<string, TenantShare>();
  for (const entry of entries) {
    if (typeof entry === 'string') shares.set(entry, DEFAULT_TENANT_SHARE);
    else shares.set(entry.name, { weight: entry.weight ?? DEFAULT_TENANT_SHARE.weight, maxConcurrency: entry.max_concurrency });
  }
  return shares;
}

/**
 * The share of `tenant`: its configured one, or the default for a tenant the configuration does
 * not list (provisioned by `provision --tenant`, found by `--all-tenants`).
 */
export function tenantShare(config: Pick<CompiledConfig, 'tenantShares'>, tenant: string): TenantShare {
  return config.tenantShares.get(tenant) ?? DEFAULT_TENANT_SHARE;
}
