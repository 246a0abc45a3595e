/**
 * The AMQP `priority` property of a job, from its OJS priority (any integer, higher first, 0 the
 * default; OJS core asks for at least -100 to 100). The broker knows ten levels (0-9) at most,
 * so the mapping is order-preserving, never strictly: a higher OJS priority never gets a lower
 * level, and the named levels (LOW -10, NORMAL 0, HIGH 10) get three different ones.
 *
 * - 0 (and a job without a priority) is level 4;
 * - a positive priority is level 5 to 9 (1-20: 5, 21-40: 6, ..., 81 and up: 9);
 * - a negative one is level 0 to 3 (-1 to -25: 3, ..., -76 and below: 0).
 *
 * The split at 4/5 is the one RabbitMQ 4.0 quorum queues make (levels above 4 are "high"): there
 * every positive priority comes before 0 and the negatives. A classic queue orders by all ten
 * levels when its `max_priority` is 9; with a smaller one the broker takes every level above it
 * as that one. Within a level, and between jobs a server already holds (its prefetch), the exact
 * OJS priority decides where stagecoach chooses (docs/priorities.md).
 */

/** The level of OJS priority 0, the default. */
export const DEFAULT_AMQP_PRIORITY = 4;
/** The highest level a priority maps to; `max_priority: 9` orders all of them. */
export const MAX_AMQP_PRIORITY = 9;
/** OJS priorities per level above 0 (5 levels for 1-100) and below it (4 levels for -1 to -100). */
const ABOVE_STEP = 20;
const BELOW_STEP = 25;

export function amqpPriority(priority: number | undefined): number {
  if (priority === undefined || !Number.isFinite(priority)) return DEFAULT_AMQP_PRIORITY;
  const p = Math.round(priority);
  if (p > 0) return Math.min(MAX_AMQP_PRIORITY, DEFAULT_AMQP_PRIORITY + Math.ceil(p / ABOVE_STEP));
  if (p < 0) return Math.max(0, DEFAULT_AMQP_PRIORITY - Math.ceil(-p / BELOW_STEP));
  return DEFAULT_AMQP_PRIORITY;
}

/**
 * Orders two jobs by OJS priority, higher first (a job without one counts as 0); equal ones keep
 * their order (callers insert stably: first come, first served within a priority).
 */
export function comparePriority(a: { priority?: number | undefined }, b: { priority?: number | undefined }): number {
  return (b.priority ?? 0) - (a.priority ?? 0);
}
