/**
 * The configuration after `withDefaults()` ({@link ConfigWithDefaults}) and `compileConfig()`
 * ({@link CompiledConfig}): validated, queues resolved, names, durations and module paths
 * resolved. The file as written is in raw-config.types.ts; both are reachable through
 * config.types.ts.
 */
import type {
  LimitConfig,
  JobStoreConfig,
  QueueConfig,
  QueueSettings,
  QueueType,
  DefaultedRetryPolicy,
  StageConfig,
  TenantConfig,
} from './raw-config.types.js';
import type { ScheduleConfig, ScheduleDefinition } from './schedule-config.types.js';
import type { ResolvedQueueSettings } from './queue-setting-declarations.js';

/** A tenant's fair-share settings, compiled: what a pooled stage process reads per tenant. */
export interface TenantShare {
  /** Positive; 1 unless configured. */
  readonly weight: number;
  /** Positive integer; undefined means unlimited. */
  readonly maxConcurrency: number | undefined;
  /** Slots guaranteed when it has work; 0 unless configured, at most `maxConcurrency`. */
  readonly minConcurrency: number;
}

/** `tracking.store` compiled: the table named. */
export type CompiledJobStoreConfig = { kind: 'memory' } | { kind: 'postgres'; url: string; table: string };

/** `payloads.store` compiled: the directory absolute, the table named. */
export type CompiledPayloadStoreConfig = { kind: 'fs'; dir: string } | { kind: 'postgres'; url: string; table: string; pool_size: number };

/**
 * A retry policy with every field present, its intervals compiled to milliseconds once (when the
 * configuration is compiled, or when a job brings its own intervals) rather than per failure.
 */
export type ResolvedRetryPolicy = DefaultedRetryPolicy & {
  /** `initial_interval` in milliseconds. */
  readonly initialIntervalMs: number;
  /** `max_interval` in milliseconds. */
  readonly maxIntervalMs: number;
};

/** A queue with `_default` and the system defaults merged in. */
export interface ResolvedQueueConfig
  extends Omit<QueueConfig, 'default_retry' | 'scope' | 'type' | 'payload_threshold' | keyof QueueSettings>, ResolvedQueueSettings {
  name: string;
  scope: 'tenant' | 'shared';
  type: QueueType;
  /** Bytes of encoded message above which a job sent to this queue travels by reference. */
  payload_threshold: number;
  default_retry: ResolvedRetryPolicy;
  /** False for a queue created implicitly (named by a stage but not by `queues`). */
  configured: boolean;
}

export type { ResolvedQueueSettings } from './queue-setting-declarations.js';

/** A {@link LimitWindow} compiled: its period in milliseconds. */
export interface CompiledWindow {
  readonly limit: number;
  readonly periodMs: number;
}

/** A named limit (`limits.<key>`) compiled (docs/flow-control.md). */
export interface CompiledLimit {
  readonly key: string;
  readonly concurrency?: number;
  readonly rate?: CompiledWindow;
  readonly throttle?: CompiledWindow;
  readonly perTenant: boolean;
}

/**
 * The layers of queue settings as written, for per-tenant resolution (`settingsFor`): system
 * defaults, `_default`, the tenant's `_default`, the queue, the tenant's queue.
 */
export interface QueueSettingsLayers {
  /** `queues._default`'s settings. */
  defaults: QueueSettings;
  /** Each configured queue's own settings. */
  queues: ReadonlyMap<string, QueueSettings>;
  /** Tenant -> queue name or `_default` -> the tenant's own settings. */
  tenants: ReadonlyMap<string, ReadonlyMap<string, QueueSettings>>;
}

/** After `withDefaults()`: every top-level field present. */
export interface BrokerSettings {
  /** The first node's URL: the user and virtual host of every node (vhost, management, user id). */
  url: string;
  /** Every node's URL, `url` first; one entry on a single broker. */
  urls: string[];
  heartbeat: number;
  /** Seconds without a byte from the broker before the process is not ready. */
  stallTimeout: number;
  reconnect: { initialDelay: number; maxDelay: number };
  /** Management API URL, credentials included: the first of `managementUrls`. */
  management: string;
  /**
   * The management API URLs to try, in order: an explicit `broker.management` alone, or else
   * the management port of every node of `urls`, in their order (ManagementClient fails over).
   */
  managementUrls: string[];
}

/** `security` with every field present. */
export interface SecuritySettings {
  tenantUsers: boolean;
  internalUser: string;
  /** Undefined when an explicit `broker.management` names no user and `operatorUser` is not set. */
  operatorUser: string | undefined;
}

export interface ConfigWithDefaults {
  prefix: string;
  broker: BrokerSettings;
  security: SecuritySettings;
  tenantHeader: string;
  tenants: Array<string | TenantConfig>;
  queues: Record<string, QueueConfig>;
  strict_queues: boolean;
  durable: boolean;
  gracePeriod: number;
  httpPort: number;
  metricsTenants: number;
  tracking: { max_age: string; store: JobStoreConfig };
  webhooks: { allow_private_addresses: boolean };
  /** `store` with its `dir` (still relative to the file) or `table` filled in. */
  payloads: { threshold: number; store: CompiledPayloadStoreConfig; orphan_after: string; retention: string };
  limits: Record<string, LimitConfig>;
  stages: Record<string, StageConfig>;
  schedules: Record<string, ScheduleConfig>;
}

export interface CompiledStageConfig {
  name: string;
  /** Absolute path of the stage module. */
  module: string;
  concurrency: number;
  prefetch: number;
  /** Per tenant in a pooled process (see StageConfig.tenant_prefetch). */
  tenantPrefetch: number;
  options: Record<string, unknown>;
  /** Worker threads for the handler; undefined runs it on the main thread. */
  threads: number | undefined;
  /** Keys of `limits` every job of the stage holds to start, each one configured. */
  limits: string[];
}

/** Validated and ready to use: queues resolved, modules absolute. */
export interface CompiledConfig {
  /** Absolute path of the file it came from, or `<inline>`. */
  source: string;
  prefix: string;
  broker: BrokerSettings;
  security: SecuritySettings;
  tenantHeader: string;
  tenants: string[];
  strict_queues: boolean;
  durable: boolean;
  /** Seconds. */
  gracePeriod: number;
  httpPort: number;
  /** Tenants with `/metrics` series of their own (see TenantLabels). */
  metricsTenants: number;
  /** The `_default` policy merged over the system defaults. */
  defaultQueue: ResolvedQueueConfig;
  /** Every configured queue, `_default` excluded. */
  queues: Map<string, ResolvedQueueConfig>;
  /** What per-tenant queue settings are resolved from (see `settingsFor`). */
  queueSettings: QueueSettingsLayers;
  /**
   * Weight and concurrency limit of every configured tenant (defaults filled in); read a tenant
   * through `tenantShare`, which also answers for tenants provisioned but not configured.
   */
  tenantShares: ReadonlyMap<string, TenantShare>;
  /** Tracking: the report stream's retention, in whole seconds; the job store (docs/job-state.md). */
  tracking: { maxAgeSeconds: number; store: CompiledJobStoreConfig };
  /** Webhook deliveries (docs/webhooks.md): whether internal addresses may be delivered to. */
  webhooks: { allowPrivateAddresses: boolean };
  /** Payload offloading (docs/payloads.md). */
  payloads: {
    /** Bytes; each queue's own is its `payload_threshold`. */
    threshold: number;
    store: CompiledPayloadStoreConfig;
    /** Whole seconds after which a payload never committed is swept. */
    orphanAfterSeconds: number;
    /** Whole seconds after which any payload is swept. */
    retentionSeconds: number;
  };
  /** Named limits on downstream resources by key (docs/flow-control.md). */
  limits: ReadonlyMap<string, CompiledLimit>;
  stages: Map<string, CompiledStageConfig>;
  /** The configuration file's schedules, checked, by name (docs/schedules.md). */
  schedules: ReadonlyMap<string, ScheduleDefinition>;
  /** The configured tenants' own time zones (`tenants[].timezone`), for per-tenant schedules. */
  tenantZones: ReadonlyMap<string, string>;
}
