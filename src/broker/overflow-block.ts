import type { CompiledConfig } from '../config/config.types.js';
import { queueFor, settingsFor } from '../config/queue-resolver.js';
import { QueueFullError } from '../errors/errors.js';
import { parseDuration } from '../util/duration.js';

/** The first wait before a refused publish into a `block` queue is tried again; it doubles from there. */
export const BLOCK_FIRST_WAIT_MS = 50;
/** The longest wait between two tries. */
export const BLOCK_MAX_WAIT_MS = 1000;

/**
 * Whether the sender still wants a blocked publish, read before every new try: a stage's emit
 * stops waiting once its job's handler failed or timed out (the job is being retried or dead-
 * lettered: a job published after that would be an orphan of a settled attempt).
 */
export interface BlockScope {
  readonly abandoned: boolean;
}

/** A `block` queue's `block_timeout`, as written (for messages) and in milliseconds. */
export interface BlockTimeout {
  readonly text: string;
  readonly ms: number;
}

/**
 * The `block_timeout` of the physical queue a job for `queue` (and `tenant`) enters when its
 * `overflow_policy` is `block` (the tenant's own settings included, as for every queue setting);
 * undefined for every other policy, whose refusal is final. Asked only when a publish was
 * refused, and kept per configuration: a full queue refuses many publishes in a row.
 */
export function blockTimeoutOf(config: CompiledConfig, queue: string, tenant: string | undefined): BlockTimeout | undefined {
  let known = blockTimeouts.get(config);
  if (known === undefined) blockTimeouts.set(config, (known = new Map()));
  const key = tenant === undefined ? queue : `${queue} ${tenant}`;
  let found = known.get(key);
  if (found === undefined) {
    // A shared queue's settings are the queue's: tenants may not change them (compile-config.ts).
    const settings = settingsFor(config, queue, queueFor(config, queue).scope === 'shared' ? undefined : tenant);
    const text = settings.block_timeout;
    found = settings.overflow_policy === 'block' && text !== undefined ? { text, ms: parseDuration(text) ?? 0 } : null;
    known.set(key, found);
  }
  return found ?? undefined;
}

const blockTimeouts = new WeakMap<CompiledConfig, Map<string, BlockTimeout | null>>();

/**
 * Tries a publish a full `block` queue refused (`refusal`) again until the broker takes it,
 * waiting 50 ms doubling to 1 s between tries, each wait drawn in its upper half (jitter, so that
 * many blocked producers do not come back together), for at most `timeout` from the first
 * refusal. A refused try is no failure: only the last, at the timeout, is.
 * @param again publishes the same message once more; its other failures (a lost channel) end the
 *   wait at once and are thrown as they are.
 * @throws QueueFullError naming the queue, the timeout and how long it waited, when time ran out
 *   or `scope` was abandoned first.
 */
export async function waitForRoom(
  refusal: QueueFullError,
  again: () => Promise<void>,
  timeout: BlockTimeout,
  scope?: BlockScope,
  random: () => number = Math.random,
): Promise<void> {
  // A function, not a field read: the scope changes while this waits.
  const abandoned = (): boolean => scope?.abandoned === true;
  const started = Date.now();
  let tries = 1;
  let wait = BLOCK_FIRST_WAIT_MS;
  for (;;) {
    const left = started + timeout.ms - Date.now();
    if (left <= 0 || abandoned()) break;
    await sleep(Math.min(left, wait * (0.5 + random() / 2)));
    wait = Math.min(BLOCK_MAX_WAIT_MS, wait * 2);
    if (abandoned()) break;
    try {
      await again();
      return;
    } catch (err) {
      if (!(err instanceof QueueFullError)) throw err;
      tries++;
    }
  }
  throw new QueueFullError(
    refusal.exchange,
    refusal.routingKey,
    {
      ...(refusal.queue === undefined ? {} : { queue: refusal.queue }),
      ...(refusal.tenant === undefined ? {} : { tenant: refusal.tenant }),
      headers: refusal.headers,
    },
    { blocked: { timeout: timeout.text, waitedMs: Date.now() - started, tries, abandoned: abandoned() } },
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
