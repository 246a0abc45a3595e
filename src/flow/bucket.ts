import type { CompiledWindow } from '../config/config.types.js';

/**
 * How a bucket's tokens are used (OJS rate-limiting extension, section 5):
 * - `concurrency`: a job holds a token while it runs and gives it back when it ends;
 * - `rate`: a job spends a token when it starts; the token cools down for the window's period
 *   and then comes back (a sliding window: no window of that length holds more starts than tokens);
 * - `throttle`: one token, cooling down `period / limit` after every start (even spacing).
 */
export type Strategy = 'concurrency' | 'rate' | 'throttle';

/**
 * One partition's one strategy: a set of tokens on the broker (docs/flow-control.md). A job may
 * start only holding a token of every bucket that applies to it.
 */
export interface Bucket {
  /** Unique under the prefix, and part of the bucket's queue names: `<partition>.<strategy>[.<cooldown ms>]`. */
  readonly id: string;
  /** The partition: `queue:<physical queue>`, `<limit key>` or `<limit key>@<tenant>`. */
  readonly partition: string;
  readonly strategy: Strategy;
  /** How many tokens exist: the concurrency, the rate's limit, or 1 for a throttle. */
  readonly size: number;
  /** How long a spent token cools down, in ms (rate and throttle); undefined for concurrency. */
  readonly cooldownMs?: number;
}

/** Buckets of one partition, in the order a job takes them: concurrency, then rate, then throttle. */
export function bucketsOf(
  partition: string,
  limit: { concurrency?: number | undefined; rate?: CompiledWindow | undefined; throttle?: CompiledWindow | undefined },
): Bucket[] {
  const buckets: Bucket[] = [];
  if (limit.concurrency !== undefined)
    buckets.push({ id: `${partition}.concurrency`, partition, strategy: 'concurrency', size: limit.concurrency });
  if (limit.rate !== undefined) buckets.push(windowBucket(partition, 'rate', limit.rate.limit, limit.rate.periodMs));
  if (limit.throttle !== undefined) buckets.push(windowBucket(partition, 'throttle', 1, limit.throttle.periodMs / limit.throttle.limit));
  return buckets;
}

/**
 * A token's cooldown is its window plus a margin: a start is stamped when its token is spent,
 * a little before its handler runs, and two processes' handlers may run a few ms later or earlier
 * than their spends; the margin keeps every window of the nominal length within the limit, as
 * measured where the handlers run. 1% of the window, from 5 to 50 ms.
 *
 * The cooldown is part of the bucket's id: a changed window is a new bucket (a window's tokens
 * cannot change their cooldown in place on the broker), a changed limit is the same one, resized.
 */
function windowBucket(partition: string, strategy: 'rate' | 'throttle', size: number, windowMs: number): Bucket {
  const cooldownMs = cooldownOf(windowMs);
  return { id: `${partition}.${strategy}.${cooldownMs}`, partition, strategy, size, cooldownMs };
}

/** A token's cooldown for a window of `windowMs`: the window plus 1% of it, from 5 to 50 ms (see windowBucket). */
export function cooldownOf(windowMs: number): number {
  return Math.round(windowMs + Math.min(50, Math.max(5, windowMs / 100)));
}

/** Broker names of a bucket, all under `<prefix>.flow.`. */
export interface BucketQueues {
  /** Where the free tokens wait; consumed by the processes that need one. */
  tokens: string;
  /** One message per token that exists (free, held or cooling down): the count that `size` is kept at. */
  ledger: string;
  /** Spent tokens wait here for their cooldown, then dead-letter back to `tokens`. */
  cooldown: string | undefined;
  /** An exclusive queue: who declares it may resize the bucket. */
  lock: string;
}

export function bucketQueues(prefix: string, bucket: Bucket): BucketQueues {
  const tokens = `${prefix}.flow.${bucket.id}`;
  return {
    tokens,
    ledger: `${tokens}.ledger`,
    cooldown: bucket.cooldownMs === undefined ? undefined : `${tokens}.cooldown`,
    lock: `${tokens}.lock`,
  };
}
