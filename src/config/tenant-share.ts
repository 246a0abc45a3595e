import { ConfigError } from '../errors/errors.js';
import type { CompiledConfig, TenantConfig, TenantShare } from './config.types.js';

/**
 * A tenant's fair share in a pooled stage process (`run --tenants` / `--all-tenants`): its
 * `weight` among the tenants with work, its `max_concurrency` cap and its `min_concurrency`
 * guarantee. Every tenant has one; a slug, or an object without them, gets the default.
 */
export const DEFAULT_TENANT_SHARE: TenantShare = Object.freeze({ weight: 1, maxConcurrency: undefined, minConcurrency: 0 });

/**
 * The share of each configured tenant, defaults filled in. The values were checked by the
 * schema (weight > 0, max_concurrency an integer >= 1, min_concurrency an integer >= 0), which
 * names the key when they are not; a minimum above the tenant's own cap is refused here. Whether
 * the minimums fit a stage's `concurrency` depends on the stage and on the tenants one process
 * serves: see {@link checkMinimums}.
 */
export function compileTenantShares(source: string, entries: ReadonlyArray<string | TenantConfig>): Map<string, TenantShare> {
  const shares = new Map<string, TenantShare>();
  entries.forEach((entry, index) => {
    if (typeof entry === 'string') {
      shares.set(entry, DEFAULT_TENANT_SHARE);
      return;
    }
    const minConcurrency = entry.min_concurrency ?? DEFAULT_TENANT_SHARE.minConcurrency;
    if (entry.max_concurrency !== undefined && minConcurrency > entry.max_concurrency) {
      throw new ConfigError(
        source,
        `tenants.${index}.min_concurrency`,
        `at most the tenant's max_concurrency (${entry.max_concurrency}), got ${minConcurrency}`,
      );
    }
    shares.set(entry.name, { weight: entry.weight ?? DEFAULT_TENANT_SHARE.weight, maxConcurrency: entry.max_concurrency, minConcurrency });
  });
  return shares;
}

/**
 * Refuses a pooled process of `stage` whose tenants' `min_concurrency` add up to more than the
 * stage's `concurrency`: the guarantees could not all hold at once. Checked where a pooled
 * process knows both (concurrency is per stage, minimums per tenant, and which tenants share a
 * process is decided by `run --tenants` / `--all-tenants`), not when the configuration is
 * compiled: a stage reading a shared queue, or tenants split over several pools, would be
 * refused for nothing.
 * @param tenants the tenants the process may serve: those given, or with `--all-tenants` every
 *   configured one (a tenant the configuration does not list has no minimum).
 * @throws ConfigError naming `stages.<stage>.concurrency`.
 */
export function checkMinimums(
  config: Pick<CompiledConfig, 'tenantShares' | 'source'>,
  stage: { name: string; concurrency: number },
  tenants: Iterable<string>,
): void {
  const minimums = [...new Set(tenants)]
    .map((tenant) => ({ tenant, min: tenantShare(config, tenant).minConcurrency }))
    .filter(({ min }) => min > 0);
  const sum = minimums.reduce((total, { min }) => total + min, 0);
  if (sum <= stage.concurrency) return;
  throw new ConfigError(
    config.source,
    `stages.${stage.name}.concurrency`,
    `at least ${sum}, the sum of the min_concurrency of the tenants a pooled process of it serves (${minimums
      .map(({ tenant, min }) => `${tenant}: ${min}`)
      .join(', ')}); got ${stage.concurrency}`,
  );
}

/**
 * The share of `tenant`: its configured one, or the default for a tenant the configuration does
 * not list (provisioned by `provision --tenant`, found by `--all-tenants`).
 */
export function tenantShare(config: Pick<CompiledConfig, 'tenantShares'>, tenant: string): TenantShare {
  return config.tenantShares.get(tenant) ?? DEFAULT_TENANT_SHARE;
}
