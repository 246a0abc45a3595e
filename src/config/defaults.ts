import type {
  CompiledPayloadStoreConfig,
  ConfigWithDefaults,
  PayloadStoreConfig,
  QueueConfig,
  RawConfig,
  DefaultedRetryPolicy,
} from './config.types.js';

/** The system defaults every queue starts from (OJS queue configuration 7.2, layer 1). */
export const SYSTEM_RETRY_DEFAULTS: DefaultedRetryPolicy = {
  max_attempts: 3,
  initial_interval: 'PT1S',
  backoff_coefficient: 2,
  max_interval: 'PT5M',
  jitter: true,
  non_retryable_errors: [],
  on_exhaustion: 'dead_letter',
};

import { SYSTEM_QUEUE_SETTINGS, type JobRetention } from './queue-setting-declarations.js';

export { SYSTEM_QUEUE_SETTINGS };

export const SYSTEM_QUEUE_DEFAULTS = {
  scope: 'tenant',
  type: 'classic',
  allowed_job_types: ['*'],
} as const satisfies QueueConfig;

export const DEFAULT_PREFIX = 'ojs';
export const DEFAULT_URL = 'amqp://guest:guest@localhost:5672/';
export const DEFAULT_MANAGEMENT_URL = 'http://guest:guest@localhost:15672/';
export const DEFAULT_TENANT_HEADER = 'x-ojs-tenant';
export const DEFAULT_HEARTBEAT_SECONDS = 60;
/** Silence from the broker before a process is not ready: a few of its probes (a third of this) unanswered. */
export const DEFAULT_STALL_TIMEOUT_SECONDS = 15;
export const DEFAULT_CONCURRENCY = 1;
export const DEFAULT_GRACE_PERIOD_SECONDS = 30;
/** How long the batch-tracking stream keeps settlement reports (docs/batches.md). */
export const DEFAULT_TRACKING_MAX_AGE = 'P7D';

/** How long the job store keeps an ended job, by final state (`queues.<q>.retention`; docs/job-state.md). */
export const DEFAULT_JOB_RETENTION = SYSTEM_QUEUE_SETTINGS.retention as Required<JobRetention>;
export const DEFAULT_HTTP_PORT = 9400;
/** Tenants with /metrics series of their own: StageMetrics's default (observability/tenant-labels.ts) for a configured process. */
export const DEFAULT_METRICS_TENANTS = 1000;
/**
 * A job whose encoded message is larger than this many bytes travels by reference
 * (docs/payloads.md). RabbitMQ 4
 * refuses messages above 16 MiB, but large messages cost long before that: a message is sent
 * whole on one channel (it delays every other frame of the connection), is kept in memory by
 * classic queues and written to the Raft log of every replica by quorum queues, and is copied
 * again by each retry and dead letter. 1 MiB keeps ordinary jobs inline and moves documents out.
 */
export const DEFAULT_PAYLOAD_THRESHOLD = 1024 * 1024;
/** The largest `payloads.threshold` (the schema's maximum): half of RabbitMQ's 16 MiB, so an inline message stays far from it. */
export const MAX_PAYLOAD_THRESHOLD = 8 * 1024 * 1024;
/** The payload store's directory, relative to the configuration file. */
export const DEFAULT_PAYLOAD_DIR = './payloads';
/** The PostgreSQL payload store's table. */
export const DEFAULT_PAYLOAD_TABLE = 'stagecoach_payloads';
/** `payloads.store.pool_size` of the PostgreSQL store: connections per process. */
export const DEFAULT_PAYLOAD_POOL_SIZE = 4;
/** A payload left pending this long is an orphan: its publisher died before the broker had its job. */
export const DEFAULT_PAYLOAD_ORPHAN_AFTER = 'PT1H';
/**
 * How long a committed payload is kept at most: longer than the longest a dead letter can be kept
 * (`dead_letter_ttl`, at most 49.7 days: RabbitMQ's largest message TTL), so that by default a
 * dead letter retried on its last day still finds its arguments.
 */
export const DEFAULT_PAYLOAD_RETENTION = 'P50D';
export const DEFAULT_RECONNECT = { initialDelay: 1, maxDelay: 30 };
/** Deliveries prefetched beyond the concurrency, so the handler never waits on a round trip. */
export const PREFETCH_BUFFER = 10;

/** The management API ports RabbitMQ listens on by default, by AMQP scheme. */
export const DEFAULT_MANAGEMENT_PORTS = { amqp: { scheme: 'http', port: 15672 }, amqps: { scheme: 'https', port: 15671 } } as const;

/**
 * The management API of the node an AMQP URL names: same host and credentials, the management
 * plugin's default port (`http` 15672 for `amqp`, `https` 15671 for `amqps`). Undefined for a URL
 * that is not an AMQP URL (compileConfig reports it).
 */
export function managementUrlOf(amqpUrl: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(amqpUrl);
  } catch {
    return undefined;
  }
  const scheme = parsed.protocol.slice(0, -1);
  if (scheme !== 'amqp' && scheme !== 'amqps') return undefined;
  const { scheme: http, port } = DEFAULT_MANAGEMENT_PORTS[scheme];
  // amqplib logs in as guest:guest when the URL names no user or password: so does this.
  const credentials = `${parsed.username || 'guest'}:${parsed.password || 'guest'}@`;
  const host = parsed.hostname.includes(':') && !parsed.hostname.startsWith('[') ? `[${parsed.hostname}]` : parsed.hostname;
  return `${http}://${credentials}${host}:${port}/`;
}

/** The decoded user name of a URL, '' when it names none. */
function userOfUrl(url: string): string {
  try {
    return decodeURIComponent(new URL(url).username);
  } catch {
    // compileConfig reports the malformed URL itself.
    return '';
  }
}

/**
 * Step 2 of the configuration: the one place where top-level defaults are merged in.
 * Queue-level inheritance (`_default`, then the queue's own fields) happens in
 * `resolveQueue()` because implicit queues need it too.
 */
export function withDefaults(raw: RawConfig): ConfigWithDefaults {
  const prefix = raw.prefix ?? DEFAULT_PREFIX;
  // `broker.url` alone is a cluster of one; with `broker.urls` it must be one of them (compileConfig checks).
  const url = raw.broker?.url ?? raw.broker?.urls?.[0] ?? DEFAULT_URL;
  const given = raw.broker?.urls ?? [url];
  const urls = given.includes(url) ? [url, ...given.filter((other) => other !== url)] : given;
  const explicit = raw.broker?.management;
  const managementUrls =
    explicit !== undefined ? [explicit] : [...new Set(urls.map(managementUrlOf).filter((m): m is string => m !== undefined))];
  const management = managementUrls[0] ?? DEFAULT_MANAGEMENT_URL;
  return {
    prefix,
    broker: {
      url,
      urls,
      heartbeat: raw.broker?.heartbeat ?? DEFAULT_HEARTBEAT_SECONDS,
      stallTimeout: raw.broker?.stallTimeout ?? DEFAULT_STALL_TIMEOUT_SECONDS,
      reconnect: {
        initialDelay: raw.broker?.reconnect?.initialDelay ?? DEFAULT_RECONNECT.initialDelay,
        maxDelay: raw.broker?.reconnect?.maxDelay ?? DEFAULT_RECONNECT.maxDelay,
      },
      management,
      managementUrls: managementUrls.length > 0 ? managementUrls : [management],
    },
    security: {
      tenantUsers: raw.security?.tenantUsers ?? false,
      internalUser: raw.security?.internalUser ?? `${prefix}.internal`,
      // Whoever manages users is the operator; a URL without a user names none. Only an explicit
      // management URL says who that is: the one found from the AMQP URL carries the user this
      // process connects as, a tenant's stage user perhaps, whom stages must not trust for every
      // tenant. Without one the operator stays the user of the former default URL (guest).
      operatorUser: raw.security?.operatorUser ?? (userOfUrl(explicit ?? DEFAULT_MANAGEMENT_URL) || undefined),
    },
    tenantHeader: raw.tenantHeader ?? DEFAULT_TENANT_HEADER,
    tenants: raw.tenants ?? [],
    queues: raw.queues ?? {},
    strict_queues: raw.strict_queues ?? false,
    durable: raw.durable ?? true,
    gracePeriod: raw.gracePeriod ?? DEFAULT_GRACE_PERIOD_SECONDS,
    httpPort: raw.httpPort ?? DEFAULT_HTTP_PORT,
    metricsTenants: raw.metricsTenants ?? DEFAULT_METRICS_TENANTS,
    tracking: { max_age: raw.tracking?.max_age ?? DEFAULT_TRACKING_MAX_AGE, store: raw.tracking?.store ?? { kind: 'memory' } },
    webhooks: { allow_private_addresses: raw.webhooks?.allow_private_addresses ?? false },
    limits: raw.limits ?? {},
    payloads: {
      threshold: raw.payloads?.threshold ?? DEFAULT_PAYLOAD_THRESHOLD,
      store: payloadStore(raw.payloads?.store),
      orphan_after: raw.payloads?.orphan_after ?? DEFAULT_PAYLOAD_ORPHAN_AFTER,
      retention: raw.payloads?.retention ?? DEFAULT_PAYLOAD_RETENTION,
    },
    stages: raw.stages ?? {},
    schedules: raw.schedules ?? {},
  };
}

/** `payloads.store` with its defaults: the filesystem store in `./payloads`, or the default table. */
function payloadStore(store: PayloadStoreConfig | undefined): CompiledPayloadStoreConfig {
  if (store?.kind === 'postgres') {
    return {
      kind: 'postgres',
      url: store.url,
      table: store.table ?? DEFAULT_PAYLOAD_TABLE,
      pool_size: store.pool_size ?? DEFAULT_PAYLOAD_POOL_SIZE,
    };
  }
  return { kind: 'fs', dir: store?.dir ?? DEFAULT_PAYLOAD_DIR };
}
