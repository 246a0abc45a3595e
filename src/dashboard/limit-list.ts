import type { LimitReport } from '../inspect/limit-report.js';

/** The dashboard's "Limits" list: the flow partitions of named limits and of jobs' own policies. */
export interface LimitList {
  /** Sorted by key, at most {@link MAX_LISTED_LIMITS}. */
  items: LimitReport[];
  /** Every such partition on the broker (`stagecoach limits` lists them all). */
  total: number;
}

/** Per-tenant limits make a partition per tenant: at 1,000 tenants the page shows the first ones. */
export const MAX_LISTED_LIMITS = 100;

/**
 * The partitions the page lists apart: a queue's own partition (`queue:<physical queue>`) shows
 * in its cell of the matrix instead, so that 1,000 tenants' queue limits do not swamp the list.
 */
export function limitList(reports: readonly LimitReport[], max = MAX_LISTED_LIMITS): LimitList {
  const named = reports.filter((report) => !report.key.startsWith('queue:'));
  return { items: named.slice(0, max), total: named.length };
}
