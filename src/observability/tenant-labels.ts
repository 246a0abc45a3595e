/** The `tenant` label of the tenants beyond the cap (see TenantLabels). */
export const OTHER_TENANTS = '_other';
/** Tenants with series of their own, by default (see TenantLabels). */
export const DEFAULT_MAX_TENANT_SERIES = 1000;

/**
 * Keeps the `tenant` label of a process's metrics bounded: the first `max` tenants seen (a
 * pooled process binds its tenants as it starts them: in the order it serves them) keep their
 * own label for the life of the process; every later one is labelled `_other`, and its counts
 * summed there. A shared queue's `""` is never counted. So a pooled process serving 10,000
 * tenants scrapes in about the time of one serving `max`: each tenant adds some 45 series (six
 * counters, two histograms of 17 buckets, its gauges), and a scrape formats them all.
 */
export class TenantLabels {
  private readonly own = new Set<string>();

  /** @param max tenants with series of their own (0: every tenant is `_other`). */
  constructor(readonly max: number = DEFAULT_MAX_TENANT_SERIES) {}

  /** The label `tenant`'s series carry. */
  of(tenant: string): string {
    if (tenant === '' || this.own.has(tenant)) return tenant;
    if (this.own.size >= this.max) return OTHER_TENANTS;
    this.own.add(tenant);
    return tenant;
  }
}
