// How numbers and levels read on the page. Null means "not sampled yet" and shows as a dash,
// never as 0: the management plugin samples every few seconds and an unknown is not an empty.

const compact = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 1 });

export function count(value) {
  if (value === null || value === undefined) return '–';
  return value < 10000 ? String(value) : compact.format(value);
}

export function rate(value) {
  if (value === null || value === undefined) return '–';
  if (value === 0) return '0';
  return value < 10 ? value.toFixed(1) : compact.format(Math.round(value));
}

export function percent(use) {
  return use === null || use === undefined ? '' : `${Math.round(use * 100)}%`;
}

/**
 * Backlog level 0-3 for a cell's colour: by how full the queue is when it is bounded (a bound
 * says what "a lot" means for it), else by how many jobs wait.
 */
export function backlogLevel(cell) {
  if (cell === null || cell.ready === null || cell.ready === 0) return 0;
  if (cell.max_size_use !== null) return cell.max_size_use >= 0.9 ? 3 : cell.max_size_use >= 0.5 ? 2 : 1;
  return cell.ready >= 10000 ? 3 : cell.ready >= 1000 ? 2 : 1;
}

export function ago(iso, now = Date.now()) {
  if (!iso) return '';
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ago`;
  return `${Math.floor(seconds / 86400)}d ago`;
}

/** "acme / conversions", or "conversions (shared)". */
export function where(queue, tenant) {
  return tenant ? `${tenant} / ${queue}` : `${queue} (shared)`;
}

const PERIODS = new Map([
  [1000, 's'],
  [60000, 'min'],
  [3600000, 'h'],
  [86400000, 'd'],
]);

/** `50/s`, `100/min`, or `10 per 2500 ms` for a window of no round unit. */
export function perWindow(limit, periodMs) {
  const unit = PERIODS.get(periodMs);
  return unit ? `${limit}/${unit}` : `${limit} per ${periodMs} ms`;
}

/**
 * A queue's own flow limits as `stagecoach queues` prints them: `3/5 run` (jobs running / its
 * concurrency; a dash before any job took a token), `20/s` (its rate limit), both; '' without.
 */
export function queueLimits(limits) {
  if (!limits) return '';
  const parts = [];
  if (limits.concurrency !== null) parts.push(`${count(limits.active)}/${limits.concurrency} run`);
  if (limits.rate_limit !== null) parts.push(perWindow(limits.rate_limit.limit, limits.rate_limit.period_ms));
  return parts.join(' ');
}
