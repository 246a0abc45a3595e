import { createRequire } from 'node:module';
import path from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { ConfigError } from '../errors/errors.js';
import type {
  CompiledConfig,
  CompiledJobStoreConfig,
  CompiledPayloadStoreConfig,
  CompiledStageConfig,
  ConfigWithDefaults,
  JobStoreConfig,
  QueueSettings,
  QueueSettingsLayers,
  RawConfig,
  ResolvedQueueConfig,
  TenantConfig,
} from './config.types.js';
import { DEFAULT_CONCURRENCY, PREFETCH_BUFFER, SYSTEM_QUEUE_SETTINGS, withDefaults } from './defaults.js';
import { parseDuration } from '../util/duration.js';
import { TENANT_SLUG, TENANT_SLUG_RULE } from '../util/tenant-slug.js';
import { resolveQueue, SETTING_KEYS } from './queue-resolver.js';
import { checkBrokerUrls, checkQueueType } from './check-cluster.js';
import { compileTenantShares } from './tenant-share.js';
import { compileSchedules, tenantZones } from './compile-schedule.js';
import { checkFlowWithTenantUsers, compileLimits, compileWindow, stageLimits } from './compile-limits.js';

/** RabbitMQ's largest `message-ttl` (2^32 - 1 ms, about 49.7 days). */
export const MAX_MESSAGE_TTL_MS = 2 ** 32 - 1;

const require = createRequire(import.meta.url);
/** The same file editors use through `$schema`; shipped in the package as `stagecoach/schema.json`. */
export const SCHEMA_PATH = require.resolve('../../../schema/stagecoach.schema.json');
const schema = require(SCHEMA_PATH) as object;

// `strict: false` turns `strictNumbers` off with the other strict modes: without it, Infinity
// and NaN pass as numbers (and as integers), and JSON.stringify writes them back as null.
const ajv = new Ajv({ allErrors: true, strict: false, strictNumbers: true });
const validateSchema = ajv.compile<RawConfig>(schema);

/**
 * Step 3 of the configuration: validate `raw` against the shipped JSON Schema, check the rules
 * a schema cannot express, and resolve queues and stage module paths.
 *
 * @param source the file it came from: errors name it, and stage modules resolve relative to it.
 * @throws ConfigError naming the file, the key and what was expected.
 */
export function compileConfig(raw: unknown, source = '<inline>'): CompiledConfig {
  checkFinite(source, raw);
  if (!validateSchema(raw)) throw schemaError(source, validateSchema.errors ?? []);
  const config = withDefaults(raw);
  const baseDir = source === '<inline>' ? process.cwd() : path.dirname(source);

  checkBrokerUrls(source, config.broker, raw);
  // One found from the AMQP URLs is well formed once they are.
  if (raw.broker?.management !== undefined) checkUrl(source, 'broker.management', config.broker.management);
  if (config.security.internalUser === config.security.operatorUser) {
    throw new ConfigError(source, 'security.internalUser', `a user other than the operator ("${config.security.operatorUser}")`);
  }

  const policy = config.queues._default;
  const queues = new Map<string, ResolvedQueueConfig>();
  for (const [name, own] of Object.entries(config.queues)) {
    if (name === '_default') continue;
    const queue = resolveQueue(name, policy, own, config.payloads.threshold);
    checkQueue(source, queue);
    checkQueueType(source, queue, raw, config.durable);
    queues.set(name, queue);
  }
  const defaultQueue = resolveQueue('_default', policy, undefined, config.payloads.threshold);
  checkQueue(source, defaultQueue);
  checkQueueType(source, defaultQueue, raw, config.durable);
  const tenants = tenantNames(source, config.tenants);
  const queueSettings = settingsLayers(source, config.queues, config.tenants);
  checkFlowWithTenantUsers(source, config.security.tenantUsers, config.limits, queueSettings);
  const tenantShares = compileTenantShares(source, config.tenants);

  const stages = new Map<string, CompiledStageConfig>();
  for (const [name, stage] of Object.entries(config.stages)) {
    const concurrency = stage.concurrency ?? DEFAULT_CONCURRENCY;
    const prefetch = stage.prefetch ?? concurrency + PREFETCH_BUFFER;
    stages.set(name, {
      name,
      module: path.resolve(baseDir, stage.module),
      concurrency,
      prefetch,
      tenantPrefetch: stage.tenant_prefetch ?? prefetch,
      options: stage.options ?? {},
      threads: stage.threads,
      limits: stageLimits(source, name, stage.limits ?? [], config.limits),
    });
  }

  const compiled: CompiledConfig = {
    source,
    prefix: config.prefix,
    broker: config.broker,
    security: config.security,
    tenantHeader: config.tenantHeader,
    tenants,
    strict_queues: config.strict_queues,
    durable: config.durable,
    gracePeriod: config.gracePeriod,
    httpPort: config.httpPort,
    metricsTenants: config.metricsTenants,
    tracking: { maxAgeSeconds: trackingMaxAge(source, config.tracking.max_age), store: jobStore(config.prefix, config.tracking.store) },
    webhooks: { allowPrivateAddresses: config.webhooks.allow_private_addresses },
    payloads: compilePayloads(source, baseDir, config),
    defaultQueue,
    queues,
    queueSettings,
    tenantShares,
    limits: compileLimits(source, config.limits),
    stages,
    schedules: new Map(),
    tenantZones: tenantZones(source, config.tenants),
  };
  // Checked against the configuration they are part of: a schedule's queue must take its jobs.
  compiled.schedules = compileSchedules(source, config.schedules, compiled);
  return compiled;
}

/**
 * Every number of the configuration is finite. JSON has no Infinity or NaN, but `JSON.parse`
 * reads a number too large for a double (`1e400`) as Infinity, which JSON.stringify would write
 * back as `null` (unlimited, for a queue size). Checked everywhere, free-form `options` included.
 */
function checkFinite(source: string, value: unknown, key = ''): void {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) {
      throw new ConfigError(
        source,
        key,
        `a finite number, got ${String(value)} (a number beyond about 1.8e308, such as 1e400, is read as Infinity; write null for unlimited where a setting takes it)`,
      );
    }
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  for (const [name, child] of Object.entries(value)) checkFinite(source, child, key === '' ? name : `${key}.${name}`);
}

/** The tenant slugs, each once (a slug and an object may not name the same tenant). */
function tenantNames(source: string, entries: ReadonlyArray<string | TenantConfig>): string[] {
  // A set, not a search of the list so far: at 10,000 tenants that search alone took 0.6 s.
  const names = new Set<string>();
  entries.forEach((entry, index) => {
    const name = typeof entry === 'string' ? entry : entry.name;
    if (names.has(name)) throw new ConfigError(source, `tenants.${index}`, `a tenant listed once ("${name}" is listed before)`);
    names.add(name);
  });
  return [...names];
}

/**
 * The layers `settingsFor` resolves per-tenant settings from, each checked: a tenant may not
 * set anything for a shared queue (one physical queue serves every tenant: OJS queue configuration
 * 8.5 says a tenant's settings must not affect the others).
 */
function settingsLayers(
  source: string,
  queues: Readonly<Record<string, QueueSettings & { scope?: string }>>,
  entries: ReadonlyArray<string | TenantConfig>,
): QueueSettingsLayers {
  const pick = (settings: QueueSettings, key: string): QueueSettings => {
    checkSettings(source, key, settings);
    const picked: QueueSettings = {};
    for (const field of SETTING_KEYS) if (settings[field] !== undefined) (picked as Record<string, unknown>)[field] = settings[field];
    return picked;
  };
  const defaultScope = queues._default?.scope ?? 'tenant';
  const own = new Map<string, QueueSettings>();
  for (const [name, queue] of Object.entries(queues)) if (name !== '_default') own.set(name, pick(queue, `queues.${name}`));
  const tenants = new Map<string, Map<string, QueueSettings>>();
  entries.forEach((entry, index) => {
    if (typeof entry === 'string' || entry.queues === undefined) return;
    const overrides = new Map<string, QueueSettings>();
    for (const [name, settings] of Object.entries(entry.queues)) {
      const key = `tenants.${index}.queues.${name}`;
      if (name !== '_default' && (queues[name]?.scope ?? defaultScope) === 'shared') {
        throw new ConfigError(source, key, `settings of a tenant-scoped queue ("${name}" is shared: one queue for every tenant)`);
      }
      overrides.set(name, pick(settings, key));
    }
    tenants.set(entry.name, overrides);
  });
  return { defaults: pick(queues._default ?? {}, 'queues._default'), queues: own, tenants };
}

function checkSettings(source: string, key: string, settings: QueueSettings): void {
  if (settings.rate_limit !== undefined && settings.rate_limit !== null) compileWindow(source, `${key}.rate_limit`, settings.rate_limit);
  for (const [state, duration] of Object.entries(settings.retention ?? {})) {
    const ms = parseDuration(duration);
    if (ms === undefined || ms < 0) throw new ConfigError(source, `${key}.retention.${state}`, `an ISO 8601 duration, got "${duration}"`);
  }
  const ttl = settings.dead_letter_ttl;
  if (typeof ttl !== 'string') return;
  const ms = parseDuration(ttl);
  if (ms === undefined || ms < 1) throw new ConfigError(source, `${key}.dead_letter_ttl`, `an ISO 8601 duration above zero, got "${ttl}"`);
  if (Math.round(ms) > MAX_MESSAGE_TTL_MS) {
    throw new ConfigError(
      source,
      `${key}.dead_letter_ttl`,
      `at most 49 days (RabbitMQ keeps a message at most 2^32-1 ms), got "${ttl}"; null keeps dead letters until purged`,
    );
  }
}

function checkUrl(source: string, key: string, url: string): void {
  try {
    new URL(url);
  } catch {
    // The message never repeats the URL: it may carry a password.
    throw new ConfigError(source, key, 'a valid URL');
  }
}

function checkQueue(source: string, queue: ResolvedQueueConfig): void {
  const key = `queues.${queue.name}`;
  const retry = queue.default_retry;
  for (const field of ['initial_interval', 'max_interval'] as const) {
    if (parseDuration(retry[field]) === undefined) {
      throw new ConfigError(source, `${key}.default_retry.${field}`, `an ISO 8601 duration, got "${retry[field]}"`);
    }
  }
  if (!queue.variants) return;
  if (queue.scope !== 'tenant') {
    throw new ConfigError(source, `${key}.variants`, 'variants only on a tenant-scoped queue (scope "tenant")');
  }
  // Each job must reach exactly one queue, so a header value may select one variant only.
  const owner = new Map<string, string>();
  for (const [variant, values] of Object.entries(queue.variants.values)) {
    for (const value of values) {
      const other = owner.get(value);
      if (other !== undefined) {
        throw new ConfigError(
          source,
          `${key}.variants.values.${variant}`,
          `values that no other variant lists ("${value}" is in "${other}" too)`,
        );
      }
      owner.set(value, variant);
    }
  }
}

function schemaError(source: string, errors: ErrorObject[]): ConfigError {
  // Report the deepest error first: it names the key closest to the mistake.
  const error = [...errors].sort((a, b) => b.instancePath.length - a.instancePath.length)[0];
  if (!error) return new ConfigError(source, '', 'a valid configuration');
  const key = error.instancePath.split('/').slice(1).map(decodePointer).join('.');
  const params = error.params as Record<string, unknown>;
  let expected: string;
  switch (error.keyword) {
    case 'additionalProperties':
      return new ConfigError(
        source,
        key ? `${key}.${String(params.additionalProperty)}` : String(params.additionalProperty),
        'no such key (unknown setting)',
      );
    case 'required':
      return new ConfigError(
        source,
        key ? `${key}.${String(params.missingProperty)}` : String(params.missingProperty),
        'a value (required)',
      );
    case 'enum':
      expected = `one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
      break;
    case 'pattern':
      // The schema's tenant pattern is TENANT_SLUG's (a unit test keeps them equal): say it in words.
      expected =
        params.pattern === TENANT_SLUG.source ? `a tenant slug (${TENANT_SLUG_RULE})` : `a string matching ${String(params.pattern)}`;
      break;
    case 'propertyNames':
      return new ConfigError(source, `${key}.${String(params.propertyName)}`, 'a name of letters, digits, "_" and "-"');
    default:
      expected = error.message ?? 'a valid value';
  }
  return new ConfigError(source, key, expected);
}

function decodePointer(part: string): string {
  return part.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** `tracking.store` with its table named: `<prefix>_jobs` unless given (a prefix's dots and dashes become `_`). */
function jobStore(prefix: string, store: JobStoreConfig): CompiledJobStoreConfig {
  if (store.kind === 'memory') return { kind: 'memory' };
  return { kind: 'postgres', url: store.url, table: store.table ?? `${prefix.replace(/[^A-Za-z0-9_]/g, '_')}_jobs` };
}

/** `tracking.max_age` in whole seconds: the stream's `x-max-age` cannot be less than a second. */
function trackingMaxAge(source: string, value: string): number {
  return wholeSeconds(source, 'tracking.max_age', value, 'P7D');
}

/**
 * `payloads`, checked: durations of at least a second, a retention longer than the orphan delay
 * and than every dead-letter TTL (a dead letter retried must still find its arguments), the
 * store's directory absolute (relative to the configuration file).
 */
function compilePayloads(source: string, baseDir: string, config: ConfigWithDefaults): CompiledConfig['payloads'] {
  const { threshold, orphan_after, retention } = config.payloads;
  const orphanAfterSeconds = wholeSeconds(source, 'payloads.orphan_after', orphan_after, 'PT1H');
  const retentionSeconds = wholeSeconds(source, 'payloads.retention', retention, 'P50D');
  if (retentionSeconds <= orphanAfterSeconds) {
    throw new ConfigError(
      source,
      'payloads.retention',
      `a duration longer than payloads.orphan_after ("${orphan_after}"), got "${retention}"`,
    );
  }
  for (const [key, ttl] of deadLetterTtls(config)) {
    const ms = parseDuration(ttl);
    if (ms !== undefined && retentionSeconds * 1000 <= ms) {
      throw new ConfigError(
        source,
        'payloads.retention',
        `a duration longer than every dead-letter TTL (${key} keeps dead letters "${ttl}": a retried dead letter would miss its payload), got "${retention}"`,
      );
    }
  }
  const store: CompiledPayloadStoreConfig =
    config.payloads.store.kind === 'fs' ? { kind: 'fs', dir: path.resolve(baseDir, config.payloads.store.dir) } : config.payloads.store;
  return { threshold, store, orphanAfterSeconds, retentionSeconds };
}

/** Every dead-letter TTL the file sets, and the system default when `_default` does not replace it: [key, ISO 8601]. */
function deadLetterTtls(config: ConfigWithDefaults): Array<[string, string]> {
  const ttls: Array<[string, string]> = [];
  if (config.queues._default?.dead_letter_ttl === undefined)
    ttls.push(['the default dead_letter_ttl', SYSTEM_QUEUE_SETTINGS.dead_letter_ttl]);
  for (const [name, queue] of Object.entries(config.queues)) {
    if (typeof queue.dead_letter_ttl === 'string') ttls.push([`queues.${name}.dead_letter_ttl`, queue.dead_letter_ttl]);
  }
  config.tenants.forEach((entry, index) => {
    if (typeof entry === 'string') return;
    for (const [name, settings] of Object.entries(entry.queues ?? {})) {
      if (typeof settings.dead_letter_ttl === 'string')
        ttls.push([`tenants.${index}.queues.${name}.dead_letter_ttl`, settings.dead_letter_ttl]);
    }
  });
  return ttls;
}

/** An ISO 8601 duration of at least a second, in whole seconds. */
function wholeSeconds(source: string, key: string, value: string, example: string): number {
  const ms = parseDuration(value);
  if (ms === undefined || ms < 1000) {
    throw new ConfigError(source, key, `an ISO 8601 duration of at least one second, such as "${example}" (got "${value}")`);
  }
  return Math.round(ms / 1000);
}
