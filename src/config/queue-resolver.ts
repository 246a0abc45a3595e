import { ConfigError } from '../errors/errors.js';
import { parseDuration } from '../util/duration.js';
import type {
  CompiledConfig,
  QueueConfig,
  QueueSettings,
  ResolvedQueueConfig,
  ResolvedQueueSettings,
  ResolvedRetryPolicy,
  DefaultedRetryPolicy,
} from './config.types.js';
import { SYSTEM_QUEUE_DEFAULTS, SYSTEM_RETRY_DEFAULTS } from './defaults.js';
import { SETTING_KEYS, SYSTEM_QUEUE_SETTINGS } from './queue-setting-declarations.js';

export { SETTING_KEYS } from './queue-setting-declarations.js';

/**
 * Layers one queue's configuration (OJS queue configuration 7.2): system defaults, then the
 * `_default` policy, then the queue's own fields. `default_retry` merges field by field so that
 * a queue that only changes `max_attempts` keeps the inherited intervals.
 *
 * @param payloadThreshold `payloads.threshold`: the system layer of `payload_threshold`.
 */
export function resolveQueue(
  name: string,
  policy: QueueConfig | undefined,
  own: QueueConfig | undefined,
  payloadThreshold: number,
): ResolvedQueueConfig {
  // The settings come from layerSettings alone: a `null` written in a layer is no value here.
  const merged: QueueConfig = { ...SYSTEM_QUEUE_DEFAULTS, ...policy, ...own };
  for (const key of SETTING_KEYS) delete merged[key];
  return {
    ...(merged as Omit<QueueConfig, keyof QueueSettings>),
    ...layerSettings(policy ?? {}, own ?? {}),
    name,
    scope: own?.scope ?? policy?.scope ?? SYSTEM_QUEUE_DEFAULTS.scope,
    type: own?.type ?? policy?.type ?? SYSTEM_QUEUE_DEFAULTS.type,
    payload_threshold: own?.payload_threshold ?? policy?.payload_threshold ?? payloadThreshold,
    default_retry: compileRetryPolicy({ ...SYSTEM_RETRY_DEFAULTS, ...policy?.default_retry, ...own?.default_retry }),
    configured: own !== undefined,
  };
}

/**
 * Queue settings layered over the system defaults, later layers winning for every key they set
 * (`null` included: it means unlimited). Keys that end up `null` or unset are left out.
 */
export function layerSettings(...layers: QueueSettings[]): ResolvedQueueSettings {
  const merged: Record<string, unknown> = { ...SYSTEM_QUEUE_SETTINGS };
  for (const layer of layers) {
    for (const key of SETTING_KEYS) if (layer[key] !== undefined) merged[key] = layer[key];
  }
  for (const key of SETTING_KEYS) if (merged[key] === null) delete merged[key];
  return merged as ResolvedQueueSettings;
}

/**
 * The settings of one logical queue's physical queues for `tenant` (OJS queue configuration 7.2 and
 * 8.5): system defaults, `_default`, the tenant's `_default`, the queue's own, the tenant's for the
 * queue. Without a tenant (or for a tenant with no settings of its own): the queue's settings,
 * as `queueFor()` resolves them.
 */
export function settingsFor(config: CompiledConfig, queue: string, tenant?: string): ResolvedQueueSettings {
  const layers = config.queueSettings;
  const own = layers.queues.get(queue) ?? {};
  const tenantLayers = tenant === undefined ? undefined : layers.tenants.get(tenant);
  if (tenantLayers === undefined) return layerSettings(layers.defaults, own);
  return layerSettings(layers.defaults, tenantLayers.get('_default') ?? {}, own, tenantLayers.get(queue) ?? {});
}

/**
 * A complete policy with its intervals in milliseconds. An interval that is not an ISO 8601
 * duration compiles to NaN; `compileConfig` refuses such a queue, and received jobs are
 * validated before their policy is compiled.
 */
export function compileRetryPolicy(policy: DefaultedRetryPolicy): ResolvedRetryPolicy {
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

/**
 * The variant whose values hold the job's variant header, as the variant exchange's bindings
 * match it (same name, same value and type), or undefined for the general queue. Variant value
 * lists do not overlap (compile-config.ts), so at most one matches.
 */
export function variantOf(queue: ResolvedQueueConfig, headers: Readonly<Record<string, unknown>>): string | undefined {
  if (!queue.variants) return undefined;
  const value = headers[queue.variants.by];
  for (const [variant, values] of Object.entries(queue.variants.values)) {
    if ((values as readonly unknown[]).includes(value)) return variant;
  }
  return undefined;
}
