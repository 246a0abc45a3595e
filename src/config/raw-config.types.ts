import type { ScheduleConfig } from './schedule-config.types.js';

/**
 * The configuration file as written: {@link RawConfig} and its parts, every field as the JSON
 * Schema (`schema/stagecoach.schema.json`) allows it. Field names inside `queues.*` follow the
 * OJS queue configuration extension (spec/ojs-queue-config.md of the Open Job Spec,
 * github.com/openjobspec/spec; snake_case); stagecoach's own fields are camelCase. What
 * `withDefaults()` and `compileConfig()` make of it is in compiled-config.types.ts; both are
 * reachable through config.types.ts.
 */

export type { DefaultedRetryPolicy, RetryPolicy } from './retry-policy.types.js';
import type { RetryPolicy } from './retry-policy.types.js';

/** How jobs of one logical queue are split into specialised queues by a header. */
export interface VariantsConfig {
  /** The AMQP header whose value selects the variant (e.g. `mime`). */
  by: string;
  /** Variant name -> header values that select it. Value lists must not overlap. */
  values: Record<string, string[]>;
}

// The per-queue settings are declared once, with their schema, defaults and docs.
export type { JobRetention, LimitWindow, QueueSettings } from './queue-setting-declarations.js';
import type { LimitWindow, QueueSettings } from './queue-setting-declarations.js';

/** `tracking.store` (docs/job-state.md). `table` defaults to `<prefix>_jobs` (the prefix's dots and dashes as `_`). */
export type JobStoreConfig = { kind: 'memory' } | { kind: 'postgres'; url: string; table?: string };

/**
 * A limit on a downstream resource (docs/flow-control.md), named at the top level under `limits`
 * and taken by stages with `stages.<name>.limits` (OJS rate-limiting extension: one partition per
 * key, or per key and tenant). Every part that is set must hold before a job starts.
 */
export interface LimitConfig {
  /** Most jobs holding this limit active at once, across every process. @defaultValue unlimited */
  concurrency?: number;
  /** Most starts in any window of `period` (sliding window). @defaultValue unlimited */
  rate?: LimitWindow;
  /** Starts spaced evenly: at most one every `period / limit`. @defaultValue unlimited */
  throttle?: LimitWindow;
  /** One partition per tenant: each tenant has the whole limit to itself. @defaultValue false */
  per_tenant?: boolean;
}

/**
 * The RabbitMQ queue type of a logical queue's physical queues: `classic` (one node holds each
 * queue) or `quorum` (Raft-replicated over the cluster's nodes: survives the loss of a minority
 * of them). See docs/cluster.md.
 */
export type QueueType = 'classic' | 'quorum';

/** One logical queue (OJS queue configuration section 6, plus scope and variants). */
export interface QueueConfig extends QueueSettings {
  /**
   * The queue type of every physical queue of this logical queue (main, variants, `due`,
   * `suspect`, dead letters). A queue argument: changing it needs the queues recreated.
   * @defaultValue "classic"
   */
  type?: QueueType;
  /** `tenant`: one physical queue per tenant; `shared`: one for all. @defaultValue "tenant" */
  scope?: 'tenant' | 'shared';
  /** Specialised queues by header value (tenant-scoped queues only). @defaultValue none */
  variants?: VariantsConfig;
  /** Default execution timeout of a job, in seconds. @defaultValue none */
  default_timeout?: number;
  /** Default retry policy of jobs in this queue. @defaultValue the `_default` policy's */
  default_retry?: RetryPolicy;
  /** Logical queue that receives jobs that exhaust their retries. @defaultValue `<prefix>.dead.<queue>[.<tenant>]` */
  dead_letter_queue?: string;
  /** Job types accepted by the queue (`*` and `prefix.*` wildcards). @defaultValue ["*"] */
  allowed_job_types?: string[];
  /**
   * AMQP `x-max-priority` of the physical queue (1-9): the broker orders its jobs by priority,
   * higher first; 9 orders every level a job's priority maps to (docs/priorities.md). A queue
   * argument (no policy can set it): changing it needs the queue recreated. @defaultValue none
   */
  max_priority?: number;
  /**
   * A job sent to this queue whose encoded message (the envelope, `args` included) is longer than
   * this many bytes travels by reference: its `args` go to the payload store (docs/payloads.md). At most 8 MiB.
   * @defaultValue `payloads.threshold` (through `_default`)
   */
  payload_threshold?: number;
}

/**
 * A tenant with settings of its own (OJS queue configuration 8.5): `queues.<name>` overrides the
 * settings of that tenant's physical queues of a tenant-scoped queue, `queues._default` those of
 * all its queues (layered as the tenant's own `_default`). Other tenants are never affected.
 */
export interface TenantConfig {
  /** The tenant slug. */
  name: string;
  /**
   * The tenant's share of a pooled stage's `concurrency` (`run --tenants` / `--all-tenants`),
   * relative to the other tenants with work: a weight of 2 gets twice the slots of a weight of 1.
   * A positive number, no unit. @defaultValue 1
   */
  weight?: number;
  /**
   * Most jobs of this tenant one pooled stage process runs at once, whatever its weight. A
   * positive integer. @defaultValue unlimited (the stage's `concurrency` bounds it)
   */
  max_concurrency?: number;
  /**
   * Jobs of this tenant a pooled stage process always makes room for when the tenant has work: a
   * guaranteed minimum of the stage's `concurrency` slots. While it holds fewer, every slot that
   * frees goes to it first (slots are not kept idle for it); above it, it shares by `weight` up
   * to `max_concurrency`. A whole number, at most `max_concurrency`; the minimums of the tenants
   * one pooled process serves may not add up to more than the stage's `concurrency`.
   * @defaultValue 0 (no minimum)
   */
  min_concurrency?: number;
  /** Queue name (or `_default`) -> the tenant's own settings. @defaultValue {} */
  queues?: Record<string, QueueSettings>;
  /** IANA time zone of the tenant: its jobs of per-tenant schedules fire on its wall clock (docs/schedules.md). @defaultValue the schedule's */
  timezone?: string;
}

/** One stage deployment: where its class lives and how hard it works. */
export interface StageConfig {
  /** ES module containing the `@Stage` class, relative to the configuration file. */
  module: string;
  /** Jobs its handler runs at once. @defaultValue 1 */
  concurrency?: number;
  /** Deliveries the broker may send ahead of the handler. @defaultValue concurrency + 10 */
  prefetch?: number;
  /**
   * Pooled processes (`run --tenants` / `--all-tenants`): deliveries the broker may send ahead per
   * tenant (per consumer of its queue and of its `due` queue), capped at the tenant's
   * `max_concurrency` + 10. Memory grows with tenants x this, never with backlogs. A tenant can
   * use only the slots its deliveries in hand cover, deliveries on their way included: a weighted
   * tenant with short jobs needs a few times its share of `concurrency` (docs/performance.md).
   * @defaultValue prefetch (concurrency + 10)
   */
  tenant_prefetch?: number;
  /** Free-form settings handed to the stage through the `STAGE_OPTIONS` token. @defaultValue {} */
  options?: Record<string, unknown>;
  /** Names of top-level `limits` every job of this stage must hold to start. @defaultValue [] */
  limits?: string[];
  /**
   * Run the handler in this many worker threads, off the event loop, so that a CPU-bound
   * handler never starves AMQP heartbeats. @defaultValue none (the main thread)
   */
  threads?: number;
}

/**
 * Broker-enforced tenant identities (README "Security"). With `tenantUsers`, every tenant gets a
 * producer user and a stage user that can touch only that tenant; stages check the validated
 * AMQP `user_id` of each job against its tenant.
 */
export interface SecurityConfig {
  /**
   * `provision` creates `<prefix>.producer.<tenant>` and `<prefix>.stage.<tenant>` (and the
   * internal user) with tenant-bound permissions; publishers stamp `user_id`; stages refuse jobs
   * whose publisher may not act for their tenant (TENANT_MISMATCH); no stage declares topology.
   * @defaultValue false
   */
  tenantUsers?: boolean;
  /** Broker user of shared-queue stages, which serve every tenant. @defaultValue "<prefix>.internal" */
  internalUser?: string;
  /**
   * Broker user of the operator (provision, dead retry, unroutable replay, `publish` as admin):
   * trusted for every tenant. @defaultValue the user name in `broker.management`
   */
  operatorUser?: string;
}

/**
 * Where offloaded job arguments are kept (docs/payloads.md "Stores"): a directory shared by the
 * stages (`fs`, the default) or a PostgreSQL table (`postgres`).
 */
export type PayloadStoreConfig =
  | {
      kind: 'fs';
      /** The shared directory, relative to the configuration file. @defaultValue "./payloads" */
      dir?: string;
    }
  | {
      kind: 'postgres';
      /** PostgreSQL connection URL; `PGPASSWORD` and the other libpq variables apply. */
      url: string;
      /** The table, created at first use. @defaultValue "stagecoach_payloads" */
      table?: string;
      /**
       * Most connections each process opens to the database, 1 to 100: the payloads of this
       * many jobs are read or written at once. @defaultValue 4
       */
      pool_size?: number;
    };

/** Payload offloading (docs/payloads.md): large job arguments travel by reference. */
export interface PayloadsConfig {
  /**
   * A job whose encoded message (the envelope, `args` included) is longer than this many bytes
   * travels by reference: its serialized `args` go to the store and the message carries
   * `x-ojs-payload-ref`. At most 8 MiB, so that a message stays well under
   * RabbitMQ's 16 MiB `max_message_size`; `queues.<name>.payload_threshold` overrides it per queue.
   * @defaultValue 1048576 (1 MiB)
   */
  threshold?: number;
  /** @defaultValue `{ "kind": "fs", "dir": "./payloads" }` */
  store?: PayloadStoreConfig;
  /**
   * A payload stored but never committed (its publisher died before the broker confirmed the
   * job) is an orphan after this long, ISO 8601 duration, and the sweep deletes it. @defaultValue "PT1H"
   */
  orphan_after?: string;
  /**
   * A committed payload still there after this long, ISO 8601 duration, is deleted by the sweep
   * whatever its job's state. Must outlast every `dead_letter_ttl`. @defaultValue "P50D"
   */
  retention?: string;
}

/** The configuration file as written. */
export interface RawConfig {
  $schema?: string;
  /** First word of every broker name. @defaultValue "ojs" */
  prefix?: string;
  broker?: {
    /** AMQP URL. Env `AMQP_URL` overrides. @defaultValue "amqp://guest:guest@localhost:5672/" */
    url?: string;
    /**
     * The AMQP URLs of a cluster's nodes (same user and virtual host): a process connects to the
     * first that answers and fails over to the others when its node goes away. Env `AMQP_URL`
     * with comma-separated URLs overrides. @defaultValue [`broker.url`]
     */
    urls?: string[];
    /** AMQP heartbeat, in seconds. @defaultValue 60 */
    heartbeat?: number;
    /**
     * Seconds without a byte from the broker after which a stage process is not ready (`/readyz`
     * 503): a connection cut without a reset (a black-holed network path), long before the
     * heartbeat notices. A quiet connection is probed (a `basic.qos` on a channel of its own) after a third
     * of it. Not counted while the broker blocks the connection. @defaultValue 15
     */
    stallTimeout?: number;
    /** Reconnection backoff, exponential with jitter. */
    reconnect?: {
      /** Seconds before the first retry. @defaultValue 1 */
      initialDelay?: number;
      /** Longest wait between retries, in seconds. @defaultValue 30 */
      maxDelay?: number;
    };
    /**
     * RabbitMQ management HTTP API, with the operator's credentials: `provision`, `plan`,
     * `apply` and the admin commands read the broker and put policies and users through it. Env
     * `STAGECOACH_MANAGEMENT_URL` overrides. It must belong to the cluster the AMQP nodes belong
     * to (checked before it is used: a ConfigError otherwise).
     * @defaultValue each AMQP node's own management port, with the AMQP URL's credentials
     *   (`amqp://u:p@host:5672/` -> `http://u:p@host:15672/`, `amqps` -> `https` and 15671),
     *   tried in the order of `broker.urls`
     */
    management?: string;
  };
  /** Who may do what on the broker. */
  security?: SecurityConfig;
  /** Header carrying the tenant slug, matched by the root exchange. @defaultValue "x-ojs-tenant" */
  tenantHeader?: string;
  /** Tenants known to `provision` and `dev`: slugs, or objects with per-tenant queue settings. @defaultValue [] */
  tenants?: Array<string | TenantConfig>;
  /** Logical queues by name; `_default` is the policy every queue inherits. @defaultValue {} */
  queues?: Record<string, QueueConfig>;
  /** Refuse stage inputs and outputs that no `queues` entry names. @defaultValue false */
  strict_queues?: boolean;
  /** Declare queues and exchanges durable (tests turn this off). @defaultValue true */
  durable?: boolean;
  /** Seconds a stopping stage waits for its jobs in flight before handing them back. @defaultValue 30 */
  gracePeriod?: number;
  /** Port of `/healthz`, `/readyz` and `/metrics`; 0 turns it off. Env `STAGECOACH_HTTP_PORT`. @defaultValue 9400 */
  httpPort?: number;
  /**
   * Tenants whose `/metrics` series carry their own `tenant` label, the first this many a process
   * serves; the rest are summed under `tenant="_other"` (a pooled process's scrape stays bounded:
   * docs/operations.md). @defaultValue 1000
   */
  metricsTenants?: number;
  /** The queue admin HTTP API (`stagecoach admin`); its token comes from env `STAGECOACH_ADMIN_TOKEN` only. */
  admin?: {
    /** Address to listen on; `--host` overrides. @defaultValue "127.0.0.1" */
    host?: string;
    /** TCP port; `--port` overrides. @defaultValue 9500 */
    port?: number;
  };
  /** Webhook deliveries of `stagecoach admin` (docs/webhooks.md). */
  webhooks?: {
    /** Deliver to internal addresses too (loopback, private, link-local, cloud metadata): docs/webhooks.md. @defaultValue false */
    allow_private_addresses?: boolean;
  };
  /** Batch tracking (docs/batches.md): the settlement-report stream `<prefix>.tracking`. */
  tracking?: {
    /**
     * How long the stream keeps reports, ISO 8601 duration (RabbitMQ `x-max-age`, whole
     * seconds). Fixed when the stream is first declared. @defaultValue "P7D"
     */
    max_age?: string;
    /**
     * Where `stagecoach tracker` folds job states (docs/job-state.md): `memory` (each reader
     * replays the stream; development and `npm start`) or `postgres` (a `jobs` table, created and
     * migrated by the tracker, read directly by `job status|list` and the admin API).
     * @defaultValue { "kind": "memory" }
     */
    store?: JobStoreConfig;
  };
  /** Payload offloading: large job arguments travel by reference (docs/payloads.md). */
  payloads?: PayloadsConfig;
  /** Named limits on downstream resources, taken by `stages.<name>.limits` (docs/flow-control.md). @defaultValue {} */
  limits?: Record<string, LimitConfig>;
  /** Stages by name. */
  stages?: Record<string, StageConfig>;
  /** Recurring jobs by name (OJS cron; docs/schedules.md), fired by the scheduler's leader. @defaultValue {} */
  schedules?: Record<string, ScheduleConfig>;
}
