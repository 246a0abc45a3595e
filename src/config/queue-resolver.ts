import { ConfigError } from '../errors/errors.js';
import { parseDuration } from '../util/duration.js';
import type { CompiledConfig, QueueConfig, ResolvedQueueConfig, ResolvedRetryPolicy, RetryPolicy } from './config.types.js';
import { SYSTEM_QUEUE_DEFAULTS, SYSTEM_RETRY_DEFAULTS } from './defaults.js';

/**
 * Layers one queue's configuration (OJS queue configuration 7.2): system defaults, then the
 * `_default` policy, then the queue's own fields. `default_retry` merges field by field so that
 * a queue that only changes `max_attempts` keeps the inherited intervals.
 */
export function resolveQueue(name: string, policy: QueueConfig | undefined, own: QueueConfig | undefined): ResolvedQueueConfig {
  return {
    ...SYSTEM_QUEUE_DEFAULTS,
    ...policy,
    ...own,
    name,
    scope: own?.scope ?? policy?.scope ?? SYSTEM_QUEUE_DEFAULTS.scope,
    default_retry: compileRetryPolicy({ ...SYSTEM_RETRY_DEFAULTS, ...policy?.default_retry, ...own?.default_retry }),
    configured: own !== undefined,
  };
}

/**
 * A complete policy with its intervals in milliseconds. An interval that is not an ISO 8601
 * duration compiles to NaN; `compileConfig` refuses such a queue, and received jobs are
 * validated before their policy is compiled.
 */
export function compileRetryPolicy(policy: Required<RetryPolicy>): ResolvedRetryPolicy {
  return {
    ...policy,
    initialIntervalMs: parseDuration(policy.initial_interval) ?? Number.NaN,
    maxIntervalMs: parseDuration(policy.max_interval) ?? Number.NaN,
  };
}

/**
 * The queue a stage reads or writes. A name no configuration mentions is created implicitly
 * with the `_default` policy (OJS 5.2), unless `strict_queues` is set.
 */
export function queueFor(config: CompiledConfig, name: string, usedBy = 'a stage'): ResolvedQueueConfig {
  const configured = config.queues.get(name);
  if (configured) return configured;
  if (config.strict_queues) {
    throw new ConfigError(config.source, `queues.${name}`, `a configured queue (strict_queues is on and ${usedBy} uses "${name}")`);
  }
  let implicit = implicitQueues.get(config);
  if (!implicit) implicitQueues.set(config, (implicit = new Map()));
  let queue = implicit.get(name);
  if (!queue) implicit.set(name, (queue = { ...config.defaultQueue, name, configured: false }));
  return queue;
}

/** Implicit queues resolved once per configuration: routing asks for them on every emit. */
const implicitQueues = new WeakMap<CompiledConfig, Map<string, ResolvedQueueConfig>>();
