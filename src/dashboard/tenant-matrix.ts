import type { CompiledConfig } from '../config/config.types.js';
import type { QueueLimits } from '../inspect/queue-flow-limits.js';
import type { QueueReport } from '../inspect/queue-report.js';
import type { QueueState } from '../queue-state/queue-state.js';
import type { StageEndpoints } from '../topology/topology.types.js';
import { pipelineOrder, type PipelineQueue } from './pipeline-order.js';

/** How the tenants' rows are picked and ordered: a page of them, never all 1,000 at once. */
export interface MatrixQuery {
  /** Tenants whose slug contains this text. */
  filter?: string;
  /** Only tenants with something to look at: dead letters, or a queue not active. */
  problems?: boolean;
  /** `name` (default), `backlog` (most jobs ready first) or `dead` (most dead letters first). */
  sort?: MatrixSort;
  offset?: number;
  limit?: number;
}

export type MatrixSort = 'name' | 'backlog' | 'dead';
export const MATRIX_SORTS: readonly MatrixSort[] = ['name', 'backlog', 'dead'];
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

/** A variant queue inside a cell (the cell sums it with the general queue). */
export interface VariantCell {
  variant: string;
  state: QueueState;
  ready: number | null;
  unacked: number | null;
  consumers: number | null;
  /** The variant queue's own flow limits (its own partition); null: none. */
  limits: QueueLimits | null;
}

/**
 * One logical queue of one tenant (or a shared queue): its general queue and variant queues
 * summed. Counts are null while the management plugin has not sampled any of them.
 */
export interface MatrixCell {
  /** The general queue's state (a drain is the whole logical queue's); see `variants` for a variant paused alone. */
  state: QueueState;
  /** Draining and empty. */
  drained: boolean;
  ready: number | null;
  /** Delivered to a stage, not yet acknowledged: in flight. */
  unacked: number | null;
  consumers: number | null;
  /** Messages per second in (published) and out (delivered), summed over the physical queues. */
  publish_rate: number | null;
  deliver_rate: number | null;
  /** Waiting on the delay ladder for a retry or a schedule, and crash suspects run alone. */
  due: number | null;
  suspect: number | null;
  /** Dead letters of the logical queue (and tenant): ready plus any being looked at. */
  dead: number | null;
  /** The fullest physical queue's `ready / max_size`; null when unbounded or not sampled. */
  max_size_use: number | null;
  /**
   * The general queue's own flow limits and the jobs running under them (each variant queue has
   * its own partition: see `variants`); null: none.
   */
  limits: QueueLimits | null;
  variants: VariantCell[];
}

export interface MatrixRow {
  tenant: string;
  /** In the configuration's `tenants` (else only found on the broker: provisioned by hand, or left over). */
  configured: boolean;
  /** By logical queue; null where the tenant has no such queue on the broker (not provisioned). */
  cells: Record<string, MatrixCell | null>;
  totals: { ready: number; unacked: number; dead: number };
}

export interface SharedColumn extends PipelineQueue {
  cell: MatrixCell | null;
}

/** What the dashboard's matrix shows, for one page of tenants. */
export interface Matrix {
  prefix: string;
  generated_at: string;
  /** Tenant-scoped logical queues in pipeline order: the matrix's columns. */
  columns: PipelineQueue[];
  /** Shared queues in pipeline order, each with its one cell. */
  shared: SharedColumn[];
  tenants: { total: number; matched: number; offset: number; limit: number; sort: MatrixSort; filter: string; problems: boolean };
  rows: MatrixRow[];
  /** Over every tenant (not only this page) and the shared queues. */
  totals: { ready: number; unacked: number; dead: number; consumers: number };
  /** Depth of `<prefix>.unroutable`; null when missing or not sampled. */
  unroutable: number | null;
}

/**
 * Folds the per-physical-queue reports of `inspectQueues` into the dashboard's tenants x queues
 * matrix. Pure, so the page's numbers are the reports' numbers: the test compares them with
 * what the broker says.
 */
export function buildMatrix(
  config: CompiledConfig,
  stages: readonly StageEndpoints[],
  reports: readonly QueueReport[],
  unroutable: number | null,
  query: MatrixQuery = {},
  now: Date = new Date(),
): Matrix {
  const extra = new Map<string, 'tenant' | 'shared'>(reports.map((report) => [report.queue, report.scope]));
  const order = pipelineOrder(config, stages, extra);

  const byCell = new Map<string, QueueReport[]>();
  const tenants = new Set(config.tenants);
  for (const report of reports) {
    const key = cellKey(report.queue, report.tenant);
    byCell.set(key, [...(byCell.get(key) ?? []), report]);
    if (report.tenant !== undefined) tenants.add(report.tenant);
  }

  const allRows = [...tenants].map((tenant): MatrixRow => {
    const cells: Record<string, MatrixCell | null> = {};
    const totals = { ready: 0, unacked: 0, dead: 0 };
    for (const column of order.tenant) {
      const cell = cellOf(byCell.get(cellKey(column.queue, tenant)));
      cells[column.queue] = cell;
      totals.ready += cell?.ready ?? 0;
      totals.unacked += cell?.unacked ?? 0;
      totals.dead += cell?.dead ?? 0;
    }
    return { tenant, configured: config.tenants.includes(tenant), cells, totals };
  });

  const filter = (query.filter ?? '').trim().toLowerCase();
  const problems = query.problems === true;
  const sort = query.sort ?? 'name';
  const matched = allRows
    .filter((row) => filter === '' || row.tenant.includes(filter))
    .filter((row) => !problems || hasProblem(row))
    .sort(
      (a, b) =>
        (sort === 'backlog' ? b.totals.ready - a.totals.ready : sort === 'dead' ? b.totals.dead - a.totals.dead : 0) ||
        a.tenant.localeCompare(b.tenant),
    );
  const limit = Math.min(Math.max(1, Math.trunc(query.limit ?? DEFAULT_PAGE_SIZE)), MAX_PAGE_SIZE);
  // A page past the end (tenants retired, a narrower filter) shows the last page, not nothing.
  const lastPage = Math.max(0, Math.floor((matched.length - 1) / limit) * limit);
  const offset = Math.min(Math.max(0, Math.trunc(query.offset ?? 0)), lastPage);

  const shared = order.shared.map((column): SharedColumn => ({ ...column, cell: cellOf(byCell.get(cellKey(column.queue, undefined))) }));
  const totals = { ready: 0, unacked: 0, dead: 0, consumers: 0 };
  for (const cell of [...allRows.flatMap((row) => Object.values(row.cells)), ...shared.map((column) => column.cell)]) {
    totals.ready += cell?.ready ?? 0;
    totals.unacked += cell?.unacked ?? 0;
    totals.dead += cell?.dead ?? 0;
    totals.consumers += cell?.consumers ?? 0;
  }

  return {
    prefix: config.prefix,
    generated_at: now.toISOString(),
    columns: order.tenant,
    shared,
    tenants: { total: allRows.length, matched: matched.length, offset, limit, sort, filter, problems },
    rows: matched.slice(offset, offset + limit),
    totals,
    unroutable,
  };
}

function cellKey(queue: string, tenant: string | undefined): string {
  return tenant === undefined ? queue : `${queue}\u0000${tenant}`;
}

function hasProblem(row: MatrixRow): boolean {
  return (
    row.totals.dead > 0 ||
    Object.values(row.cells).some((cell) => cell !== null && (cell.state !== 'active' || cell.variants.some((v) => v.state !== 'active')))
  );
}

/** The general queue and its variant queues of one logical queue and tenant, as one cell. */
function cellOf(reports: readonly QueueReport[] | undefined): MatrixCell | null {
  if (reports === undefined || reports.length === 0) return null;
  const general = reports.find((report) => report.variant === undefined) ?? reports[0];
  const uses = reports.map((report) => report.max_size_use).filter((use): use is number => use !== null);
  return {
    state: general.state,
    drained: general.drained,
    ready: sum(reports.map((report) => report.ready)),
    unacked: sum(reports.map((report) => report.unacked)),
    consumers: sum(reports.map((report) => report.consumers)),
    publish_rate: sum(reports.map((report) => report.publish_rate)),
    deliver_rate: sum(reports.map((report) => report.deliver_rate)),
    due: sum(reports.map((report) => depth(report.due))),
    suspect: sum(reports.map((report) => depth(report.suspect))),
    // One dead-letter queue per logical queue and tenant, named in every report of the cell.
    dead: depth(general.dead),
    max_size_use: uses.length === 0 ? null : Math.max(...uses),
    limits: general.limits,
    variants: reports
      .filter((report) => report.variant !== undefined)
      .map((report) => ({
        variant: report.variant ?? '',
        state: report.state,
        ready: report.ready,
        unacked: report.unacked,
        consumers: report.consumers,
        limits: report.limits,
      })),
  };
}

function depth(companion: QueueReport['dead']): number | null {
  if (!companion.exists) return 0;
  return sum([companion.ready, companion.unacked]);
}

/** Null only when nothing is known; a queue not sampled yet adds nothing rather than hiding the others. */
function sum(values: ReadonlyArray<number | null>): number | null {
  const known = values.filter((value): value is number => value !== null);
  return known.length === 0 ? null : known.reduce((a, b) => a + b, 0);
}
