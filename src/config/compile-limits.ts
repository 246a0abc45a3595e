import { ConfigError } from '../errors/errors.js';
import { parseDuration } from '../util/duration.js';
import type { CompiledLimit, CompiledWindow, QueueSettingsLayers } from './compiled-config.types.js';
import type { LimitConfig, LimitWindow, QueueSettings } from './raw-config.types.js';

/** The shortest window a limit may have, in ms: tokens come back through a broker-side TTL. */
export const MIN_LIMIT_PERIOD_MS = 10;
/** The longest, in ms: a day (a token in its cooldown outlives no broker restart anyway). */
export const MAX_LIMIT_PERIOD_MS = 86_400_000;

/** `{ limit, period }` with its period in ms, checked (the schema checks `limit`). */
export function compileWindow(source: string, key: string, window: LimitWindow): CompiledWindow {
  const periodMs = parseDuration(window.period);
  if (periodMs === undefined || periodMs < MIN_LIMIT_PERIOD_MS || periodMs > MAX_LIMIT_PERIOD_MS) {
    throw new ConfigError(source, `${key}.period`, `an ISO 8601 duration from 10 ms to 1 day, got "${window.period}"`);
  }
  return { limit: window.limit, periodMs: Math.round(periodMs) };
}

/** `limits.<key>` compiled; a limit that limits nothing is a mistake worth naming. */
export function compileLimits(source: string, limits: Readonly<Record<string, LimitConfig>>): Map<string, CompiledLimit> {
  const compiled = new Map<string, CompiledLimit>();
  for (const [key, limit] of Object.entries(limits)) {
    const at = `limits.${key}`;
    if (limit.concurrency === undefined && limit.rate === undefined && limit.throttle === undefined) {
      throw new ConfigError(source, at, 'at least one of concurrency, rate and throttle');
    }
    compiled.set(key, {
      key,
      ...(limit.concurrency === undefined ? {} : { concurrency: limit.concurrency }),
      ...(limit.rate === undefined ? {} : { rate: compileWindow(source, `${at}.rate`, limit.rate) }),
      ...(limit.throttle === undefined ? {} : { throttle: compileWindow(source, `${at}.throttle`, limit.throttle) }),
      perTenant: limit.per_tenant ?? false,
    });
  }
  return compiled;
}

/** `stages.<name>.limits`, each a configured limit. */
export function stageLimits(
  source: string,
  stage: string,
  names: readonly string[],
  limits: Readonly<Record<string, LimitConfig>>,
): string[] {
  names.forEach((name, index) => {
    if (limits[name] === undefined) {
      throw new ConfigError(source, `stages.${stage}.limits.${index}`, `the key of a configured limit (no limits.${name})`);
    }
  });
  return [...names];
}

/**
 * Flow limits need every stage to declare and consume the `<prefix>.flow.*` queues; the broker
 * users `security.tenantUsers` gives stages have no permission on them (yet). Refused up front
 * rather than found as jobs that wait for tokens they can never take.
 */
export function checkFlowWithTenantUsers(
  source: string,
  tenantUsers: boolean,
  limits: Readonly<Record<string, LimitConfig>>,
  layers: QueueSettingsLayers,
): void {
  if (!tenantUsers) return;
  const limited = (settings: QueueSettings): boolean =>
    (settings.concurrency !== undefined && settings.concurrency !== null) ||
    (settings.rate_limit !== undefined && settings.rate_limit !== null);
  const where =
    Object.keys(limits).length > 0
      ? 'limits'
      : limited(layers.defaults)
        ? 'queues._default'
        : ([...layers.queues].find(([, settings]) => limited(settings))?.[0] ??
          [...layers.tenants].find(([, byQueue]) => [...byQueue.values()].some(limited))?.[0]);
  if (where === undefined) return;
  throw new ConfigError(
    source,
    where.startsWith('queues') || where === 'limits' ? where : `tenants (${where})`,
    'no flow limits with security.tenantUsers: stage users have no permission on the <prefix>.flow.* queues yet (docs/flow-control.md)',
  );
}
