import { formatQueueLimits } from './queue-flow-limits.js';
import type { CompanionDepth, QueueReport } from './queue-report.js';

const COLUMNS = [
  'QUEUE',
  'TENANT',
  'VARIANT',
  'STATE',
  'READY',
  'UNACKED',
  'CONSUMERS',
  'IN/S',
  'OUT/S',
  'MAX_SIZE',
  'USE',
  'DUE',
  'SUSPECT',
  'DEAD',
  'LIMITS',
];

/** Lines of the `queues` table by default: 10,000 tenants are some 20,000 physical queues. */
export const DEFAULT_TABLE_ROWS = 200;

/** Which rows of the table to print (the JSON output has them all). */
export interface TablePage {
  /** Rows skipped. @defaultValue 0 */
  offset?: number;
  /** Rows printed at most; 0: all. @defaultValue DEFAULT_TABLE_ROWS */
  limit?: number;
}

/**
 * `stagecoach queues` for people: one line per physical queue, columns aligned, `-` for what is
 * unknown (not sampled yet, unbounded, no such companion queue, no flow limit), then a note on
 * where the numbers come from. A page of the rows (`page`), with a line saying how to see the others.
 */
export function formatQueues(all: readonly QueueReport[], page: TablePage = {}): string {
  if (all.length === 0) return 'no queues\n';
  const offset = page.offset ?? 0;
  const limit = page.limit ?? DEFAULT_TABLE_ROWS;
  const reports = all.slice(offset, limit === 0 ? undefined : offset + limit);
  const rows = reports.map((r) => [
    r.queue,
    r.tenant ?? '(shared)',
    r.variant ?? '',
    r.drained ? 'draining (drained)' : r.state,
    show(r.ready),
    show(r.unacked),
    show(r.consumers),
    rate(r.publish_rate),
    rate(r.deliver_rate),
    maxSize(r),
    r.max_size_use === null ? '-' : `${Math.round(r.max_size_use * 100)}%`,
    depth(r.due),
    depth(r.suspect),
    depth(r.dead),
    formatQueueLimits(r.limits),
  ]);
  const widths = COLUMNS.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]): string =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  const shown =
    reports.length === all.length
      ? []
      : [
          `queues ${reports.length === 0 ? 'none' : `${offset + 1}-${offset + reports.length}`} of ${all.length}: --offset ${offset + reports.length} for the next, --limit 0 for all, --tenant T for one tenant's`,
        ];
  return [
    line(COLUMNS),
    ...rows.map(line),
    ...shown,
    '',
    "counts and rates (messages per second) are the management plugin's samples, up to its collection interval old (5 s by default)",
    ...(reports.some((r) => r.limits !== null)
      ? [
          'LIMITS: the queue\'s own flow limits, jobs running/concurrency ("-" before any job needed a token) and starts per window (`stagecoach limits` for every partition)',
        ]
      : []),
    '',
  ].join('\n');
}

/** The enforced bound, and the configured one when they differ (until `stagecoach apply`). */
function maxSize(report: QueueReport): string {
  const enforced = show(report.max_size);
  if (report.max_size === report.configured_max_size) return enforced;
  return `${enforced} (configured ${show(report.configured_max_size)})`;
}

function depth(queue: CompanionDepth): string {
  if (!queue.exists) return '-';
  if (queue.ready === null || queue.unacked === null) return '?';
  return String(queue.ready + queue.unacked);
}

function show(value: number | null): string {
  return value === null ? '-' : String(value);
}

function rate(value: number | null): string {
  return value === null ? '-' : value.toFixed(1);
}
