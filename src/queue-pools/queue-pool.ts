import { StagecoachError } from '../errors/errors.js';
import { isQueueName, QUEUE_NAME_RULE } from '../util/queue-name.js';

/** How a fetch over several queues chooses the queue of each job it hands out (ojs-fair-scheduling 7). */
export type PoolStrategy = 'strict' | 'round-robin' | 'weighted';

export const POOL_STRATEGIES: readonly PoolStrategy[] = ['strict', 'round-robin', 'weighted'];

/**
 * A queue pool (ojs-fair-scheduling 6.1; docs/http-binding.md "Queue pools"): a named list of
 * queues an operator defines for HTTP workers, and how a fetch naming it spreads its jobs over
 * them. Kept in the schedules stream (schedule-records.ts) beside the webhook subscriptions, so
 * every admin server knows it and it survives restarts.
 *
 * What holds: 1 to MAX_POOL_QUEUES distinct queue names; every queue has a weight, an integer from
 * 1 to MAX_POOL_WEIGHT (1 unless the pool is `weighted` and names another).
 */
export interface QueuePool {
  name: string;
  strategy: PoolStrategy;
  /** In the operator's order: `strict` serves them so, `round-robin` cycles them so. */
  queues: string[];
  /** By queue: its share of the dispatches of a `weighted` pool. */
  weights: Record<string, number>;
  created_at: string;
  updated_at: string;
}

/** Most queue pools a server keeps: each is a picker in memory and a record in every snapshot. */
export const MAX_QUEUE_POOLS = 64;
/** Most queues one pool names: a fetch serves every one of them (as MAX_FETCH_QUEUES). */
export const MAX_POOL_QUEUES = 16;
export const MAX_POOL_WEIGHT = 1000;
/** A pool's name: as a queue's, so that it fits a path segment and a log line. */
const POOL_NAME = /^[a-z0-9][a-z0-9_.-]{0,127}$/;

function invalid(message: string): StagecoachError {
  return new StagecoachError('INVALID_REQUEST', message);
}

export function checkPoolName(name: string): string {
  if (!POOL_NAME.test(name))
    throw invalid(`pool name ${JSON.stringify(name.slice(0, 140))}: lowercase letters, digits, "-", "." and "_", at most 128 characters`);
  return name;
}

/** A pool's queues and strategy, as a PUT body or a worker's fetch gives them. */
export type PoolPlan = Pick<QueuePool, 'strategy' | 'queues' | 'weights'>;

/**
 * Reads a pool definition: `strategy` (default `round-robin`, spec 6.1), and `queues` either as the
 * spec's list with `weights` beside it (`{ "queues": ["a", "b"], "weights": { "a": 3 } }`) or as an
 * object of queues to `{ weight }` (`{ "queues": { "a": { "weight": 3 } } }`). A queue left out of
 * `weights` weighs 1. Unknown fields (`concurrency`, `name`) are ignored, as OJS bodies allow.
 * @throws StagecoachError `INVALID_REQUEST` naming the field.
 */
export function readPoolPlan(body: Record<string, unknown>, defaultStrategy: PoolStrategy = 'round-robin'): PoolPlan {
  const strategy = readStrategy(body.strategy) ?? defaultStrategy;
  const { queues, weights } = readQueues(body.queues, body.weights, 'queues');
  if (strategy !== 'weighted') for (const queue of queues) weights[queue] = 1;
  return { strategy, queues, weights };
}

export function readStrategy(value: unknown): PoolStrategy | undefined {
  if (value === undefined || value === null) return undefined;
  if (!POOL_STRATEGIES.includes(value as PoolStrategy))
    throw invalid(
      `"strategy" must be one of ${POOL_STRATEGIES.map((s) => `"${s}"`).join(', ')}, got ${JSON.stringify(value)?.slice(0, 60)}`,
    );
  return value as PoolStrategy;
}

function readQueues(value: unknown, weightsValue: unknown, field: string): { queues: string[]; weights: Record<string, number> } {
  let entries: Array<[string, unknown]>;
  if (Array.isArray(value)) {
    const listed = new Set<string>();
    for (const queue of value) {
      if (!isQueueName(queue))
        throw invalid(`"${field}": ${JSON.stringify(queue)?.slice(0, 120)} is not a queue name (${QUEUE_NAME_RULE})`);
      listed.add(queue);
    }
    const given = weightsValue ?? {};
    if (typeof given !== 'object' || given === null || Array.isArray(given))
      throw invalid('"weights" must be an object of queue names to weights');
    for (const queue of Object.keys(given)) {
      if (!listed.has(queue)) throw invalid(`"weights.${queue.slice(0, 120)}": the queue is not in "${field}"`);
    }
    entries = [...listed].map((queue) => [queue, (given as Record<string, unknown>)[queue]]);
  } else if (typeof value === 'object' && value !== null) {
    entries = Object.entries(value).map(([queue, entry]: [string, unknown]) => {
      if (!isQueueName(queue))
        throw invalid(`"${field}": ${JSON.stringify(String(queue).slice(0, 120))} is not a queue name (${QUEUE_NAME_RULE})`);
      if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
        throw invalid(`"${field}.${queue}" must be an object such as { "weight": 1 }`);
      return [queue, (entry as Record<string, unknown>).weight];
    });
  } else {
    throw invalid(`"${field}" must be a list of queue names, or an object of queue names to { "weight": n }`);
  }
  if (entries.length === 0 || entries.length > MAX_POOL_QUEUES) throw invalid(`"${field}" must name 1 to ${MAX_POOL_QUEUES} queues`);
  const weights: Record<string, number> = {};
  for (const [queue, weight] of entries) {
    if (weight !== undefined && (!Number.isInteger(weight) || (weight as number) < 1 || (weight as number) > MAX_POOL_WEIGHT))
      throw invalid(`"weights.${queue}" must be an integer from 1 to ${MAX_POOL_WEIGHT}, got ${JSON.stringify(weight)?.slice(0, 60)}`);
    weights[queue] = (weight as number | undefined) ?? 1;
  }
  return { queues: entries.map(([queue]) => queue), weights };
}

/** A pool as `GET /ojs/v1/admin/pools` shows it, beside the stage pools (`kind: "stage"`). */
export function queuePoolView(pool: QueuePool): Record<string, unknown> {
  return {
    kind: 'queues',
    name: pool.name,
    strategy: pool.strategy,
    queues: pool.queues,
    weights: pool.weights,
    created_at: pool.created_at,
    updated_at: pool.updated_at,
  };
}
