import type { CompiledConfig, CompiledLimit, CompiledWindow } from '../config/config.types.js';
import { settingsFor } from '../config/queue-resolver.js';
import { OJS_HEADERS } from '../job/amqp-mapping.js';
import { parseDuration } from '../util/duration.js';
import { bucketsOf, type Bucket } from './bucket.js';
import { compileWindow, MAX_LIMIT_PERIOD_MS, MIN_LIMIT_PERIOD_MS } from '../config/compile-limits.js';

/**
 * The header carrying a job's own OJS `rate_limit` policy (JSON), stamped by stagecoach's
 * producers from the job's `rate_limit` field: a stage reads it without decoding the body.
 */
const RATE_LIMIT_HEADER = OJS_HEADERS.rateLimit;

/** What a job does when its limit is reached: waits (the default), goes back for later, or is dropped. */
export type OnLimit = 'wait' | 'reschedule' | 'drop';

/** Where a runner's jobs come from, as its limits see it. */
export interface LimitScope {
  /** The stage's name in the configuration (its `limits`). */
  stage: string;
  /** The logical input queue (its `concurrency` and `rate_limit`). */
  queue: string;
  /** The instance's physical queue: the partition of the queue's limits. */
  physical: string;
  /** The instance's tenant; undefined on a shared queue, where a job's tenant is its header's. */
  tenant: string | undefined;
}

/** The configuration limits are read from, replaced when limits change at run time (FlowControl). */
export interface LimitSettings {
  readonly config: CompiledConfig;
  /** Bumped on every replacement: what was worked out from the former configuration is stale. */
  readonly version: number;
}

/**
 * Works out which buckets a delivery must hold a token of (docs/flow-control.md, "Which limits
 * apply"): its queue's `concurrency` and `rate_limit` (the tenant's own settings first), its
 * stage's named `limits` (one partition per tenant for `per_tenant`), and the job's own
 * `rate_limit` policy (a configured limit of the same key wins over the job's numbers).
 *
 * What depends only on the instance is worked out once per configuration; a delivery pays for a
 * header lookup, and for more only on a shared queue with per-tenant limits or a job with a policy.
 */
export class LimitResolver {
  private version = -1;
  private fixed: Bucket[] = [];
  /** Per-tenant limits of a shared queue's stage: partitioned by each job's tenant. */
  private perJobTenant: CompiledLimit[] = [];
  private readonly policies = new Map<string, Bucket[]>();

  constructor(
    private readonly settings: LimitSettings,
    private readonly scope: LimitScope,
    private readonly tenantHeader: string,
  ) {}

  /** The buckets, in taking order; empty when no limit applies. */
  buckets(headers: Record<string, unknown> | undefined): Bucket[] {
    if (this.version !== this.settings.version) this.refresh();
    // Stage users of `security.tenantUsers` cannot take tokens (compileConfig refuses configured
    // limits there): a job's own policy is not enforced either.
    if (this.settings.config.security.tenantUsers) return this.fixed;
    const policy = headers?.[RATE_LIMIT_HEADER];
    if (this.perJobTenant.length === 0 && policy === undefined) return this.fixed;
    const extra: Bucket[] = [];
    if (this.perJobTenant.length > 0) {
      const tenant = headers?.[this.tenantHeader];
      for (const limit of this.perJobTenant) extra.push(...limitBuckets(limit, typeof tenant === 'string' ? tenant : undefined));
    }
    if (typeof policy === 'string') extra.push(...this.policyBuckets(policy, headers?.[this.tenantHeader]));
    return extra.length === 0 ? this.fixed : inTakingOrder([...this.fixed, ...extra]);
  }

  private refresh(): void {
    const { config } = this.settings;
    const { scope } = this;
    this.version = this.settings.version;
    this.policies.clear();
    const fixed = queueBuckets(config, scope);
    this.perJobTenant = [];
    for (const key of config.stages.get(scope.stage)?.limits ?? []) {
      const limit = config.limits.get(key) as CompiledLimit;
      if (limit.perTenant && scope.tenant === undefined) this.perJobTenant.push(limit);
      else fixed.push(...limitBuckets(limit, scope.tenant));
    }
    this.fixed = inTakingOrder(fixed);
  }

  /** What a job's own policy says to do when its limit is reached (OJS rate-limiting extension 6.2); `wait` without one. */
  onLimit(headers: Record<string, unknown> | undefined): OnLimit {
    const header = headers?.[RATE_LIMIT_HEADER];
    if (typeof header !== 'string' || !header.includes('on_limit')) return 'wait';
    try {
      const action = (JSON.parse(header) as { on_limit?: unknown }).on_limit;
      return action === 'reschedule' || action === 'drop' ? action : 'wait';
    } catch {
      return 'wait';
    }
  }

  private policyBuckets(header: string, tenant: unknown): Bucket[] {
    const cacheKey = `${typeof tenant === 'string' ? tenant : ''} ${header}`;
    let buckets = this.policies.get(cacheKey);
    if (buckets === undefined) {
      buckets = policyBuckets(this.settings.config, header, typeof tenant === 'string' ? tenant : undefined);
      // Bounded: jobs may carry any number of keys.
      if (this.policies.size >= 1000) this.policies.clear();
      this.policies.set(cacheKey, buckets);
    }
    return buckets;
  }
}

function limitBuckets(limit: CompiledLimit, tenant: string | undefined): Bucket[] {
  return bucketsOf(limit.perTenant ? `${limit.key}@${tenant ?? '-'}` : limit.key, limit);
}

/**
 * A job's own policy (OJS rate-limiting extension 6.1). A policy that does not parse limits
 * nothing here: the job's envelope is validated before its handler runs, and refused there with
 * its reason.
 */
function policyBuckets(config: CompiledConfig, header: string, tenant: string | undefined): Bucket[] {
  let policy: Record<string, unknown>;
  try {
    policy = JSON.parse(header) as Record<string, unknown>;
  } catch {
    return [];
  }
  if (typeof policy !== 'object' || policy === null || typeof policy.key !== 'string') return [];
  const configured = config.limits.get(policy.key);
  if (configured !== undefined) return limitBuckets(configured, tenant);
  const concurrency = typeof policy.concurrency === 'number' && Number.isInteger(policy.concurrency) ? policy.concurrency : undefined;
  return bucketsOf(policy.key, {
    concurrency: concurrency !== undefined && concurrency >= 0 ? concurrency : undefined,
    rate: jobWindow(policy.rate),
    throttle: jobWindow(policy.throttle),
  });
}

function jobWindow(value: unknown): CompiledWindow | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { limit, period } = value as { limit?: unknown; period?: unknown };
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || typeof period !== 'string') return undefined;
  const periodMs = parseDuration(period);
  if (periodMs === undefined || periodMs < MIN_LIMIT_PERIOD_MS || periodMs > MAX_LIMIT_PERIOD_MS) return undefined;
  return { limit, periodMs: Math.round(periodMs) };
}

/** The buckets of a physical queue's own limits (`concurrency`, `rate_limit`; the tenant's settings first). */
export function queueBuckets(config: CompiledConfig, scope: Pick<LimitScope, 'queue' | 'physical' | 'tenant'>): Bucket[] {
  const settings = settingsFor(config, scope.queue, scope.tenant);
  const window = settings.rate_limit;
  // Checked when the configuration was compiled: compileWindow only converts it here.
  return bucketsOf(`queue:${scope.physical}`, {
    concurrency: settings.concurrency,
    rate: window === undefined ? undefined : compileWindow(config.source, `queues.${scope.queue}.rate_limit`, window),
  });
}

const STRATEGY_ORDER = { concurrency: 0, rate: 1, throttle: 2 } as const;

/** Concurrency tokens first (held the longest), then rate, then throttle; each bucket once. */
function inTakingOrder(buckets: Bucket[]): Bucket[] {
  const unique = [...new Map(buckets.map((bucket) => [bucket.id, bucket])).values()];
  return unique.sort((a, b) => STRATEGY_ORDER[a.strategy] - STRATEGY_ORDER[b.strategy] || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
