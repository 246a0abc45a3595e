import type { CompiledConfig, QueueConfig, RawConfig, TenantConfig } from '../config/config.types.js';
import { SETTING_KEYS, settingsFor } from '../config/queue-resolver.js';
import { settingsEnforcedBy } from '../config/queue-setting-declarations.js';
import type { AdminContext } from './admin-context.js';
import { ApiError } from './api-error.js';
import { reportsOf } from './queue-lookup.js';
import { configView } from './queue-views.js';
import { readJsonObject } from './request-body.js';
import { checkScope, queueName, tenantParam } from './request-params.js';
import type { ApiRequest, ApiResponse } from './router.js';
import { withCommandEvents } from '../events/command-events.js';
import { syncQueueSettings, type SettingsSync } from '../plan/queue-settings.js';
import { provisionQueues } from '../topology/build-topology.js';
import { announceLimits } from '../control/announce-limits.js';

/**
 * Fields that shape the queues on the broker (which queues exist, their arguments): changing one
 * means declaring other queues or recreating them, which a running pipeline cannot do in place.
 * A PUT may repeat their current value or leave them out (they are kept); another value is a 422.
 * `type` is listed ahead of the queue types of `queues.<name>.type`.
 */
const TOPOLOGY_FIELDS = ['scope', 'variants', 'max_priority', 'type'] as const;

/** Fields the stages read when they start: written at once, in effect at the next stage start. */
const STAGE_FIELDS = ['default_timeout', 'default_retry', 'dead_letter_queue', 'allowed_job_types', ...settingsEnforcedBy('stage start')];

/** `GET /ojs/v1/queues/{name}/config[?tenant=T]` and `GET /ojs/v1/queues/_default/config[?tenant=T]`: the effective configuration. */
export function getConfig(fixed?: '_default') {
  return async (ctx: AdminContext, { params, query }: ApiRequest): Promise<ApiResponse> => {
    const name = fixed ?? queueName(params);
    const tenant = tenantParam(query);
    const config = await ctx.configFile.load();
    if (name !== '_default') {
      checkScope(config, name, tenant);
      await reportsOf(ctx, config, name, tenant);
    } else if (tenant !== undefined) checkTenant(config, tenant);
    return {
      status: 200,
      body: {
        name,
        ...(tenant === undefined ? {} : { tenant }),
        configured: name === '_default' || config.queues.has(name),
        config: configView(config, name, tenant),
      },
    };
  };
}

/**
 * `PUT /ojs/v1/queues/{name}/config` and `PUT /ojs/v1/queues/_default/config`: the body replaces
 * the queue's own entry in the configuration file (`queues.<name>`). Once the result compiles,
 * the queue settings are put on the broker as `apply` would (policies: in effect at once, no
 * stage restarts), and only then is the file written back (atomically). After any error the
 * file is as it was, and the broker is given the file's settings back. With `?tenant=T` the body replaces that
 * tenant's own settings of the queue (`tenants[].queues.<name>`, settings only, OJS queue configuration 8.5).
 *
 * The answer says which policies changed and which fields need a stage restart to take effect
 * (`restart_needed`). Topology fields are kept when left out and refused when changed (422).
 */
export function putConfig(fixed?: '_default') {
  return async (ctx: AdminContext, { params, query, req }: ApiRequest): Promise<ApiResponse> => {
    const name = fixed ?? queueName(params);
    const tenant = tenantParam(query);
    const body = await readJsonObject(req);
    return { status: 200, body: (await replaceQueueEntry(ctx, name, tenant, () => body)).body };
  };
}

/**
 * Replaces the queue's own entry (`queues.<name>`, or with `tenant` that tenant's own settings of
 * it) by what `entryOf` makes of the file as it is now, as `PUT /ojs/v1/queues/{name}/config`
 * describes: compiled, put on the broker, then written; one change at a time. The answer's body
 * and the configuration it compiled to. `configureNew`: a queue nothing knows yet (not configured,
 * used by no stage, not on the broker) is given its entry, where it is otherwise a 404.
 */
export async function replaceQueueEntry(
  ctx: AdminContext,
  name: string,
  tenant: string | undefined,
  entryOf: (raw: RawConfig) => Record<string, unknown>,
  configureNew = false,
): Promise<{ body: Record<string, unknown>; after: CompiledConfig }> {
  return ctx.serializer.run(async () => {
    const raw = await ctx.configFile.readRaw();
    const before = ctx.configFile.compile(raw);
    if (name !== '_default') {
      checkScope(before, name, tenant);
      if (!configureNew || tenant !== undefined) await reportsOf(ctx, before, name, tenant);
    }
    const body = entryOf(raw);
    const next = tenant === undefined ? withQueueEntry(before, raw, name, body) : withTenantEntry(before, raw, name, tenant, body);
    const removed = droppedFields(ownEntry(raw, name, tenant), ownEntry(next, name, tenant));
    // Compiled first (a 422 naming the key, nothing touched), then put on the broker, and
    // written only once the broker has it: a refusal leaves the file as it was.
    const after = ctx.configFile.compile(next);
    // `_default` concerns every queue provision knows; only those (a stage module the server
    // could not load would keep its queue's policies).
    const queues = name === '_default' ? provisionQueues(after, ctx.stages).map((queue) => queue.name) : [name];
    const sync = (config: CompiledConfig): Promise<SettingsSync> =>
      withCommandEvents(config, 'admin', ctx.log, (onEvent) =>
        syncQueueSettings(config, ctx.stages, ctx.api(config), { removeStale: true, queues, onEvent }),
      );
    let policies: SettingsSync;
    try {
      policies = await sync(after);
      await ctx.configFile.write(next);
    } catch (err) {
      // Part of it may be on the broker: the file's settings go back (as `apply` would put them).
      await sync(before).catch((undo: unknown) =>
        ctx.log.error('queue settings not restored after a failed change: run `stagecoach apply`', {
          queue: name,
          tenant,
          err: (undo as Error).message,
        }),
      );
      throw err;
    }
    // Running stages read the file again and resize their limits' tokens (docs/flow-control.md).
    if (limitsChanged(before, after, name, tenant)) {
      await announceLimits(after, ctx.log);
    }
    const restart = tenant === undefined ? changedStageFields(before, after, name) : changedTenantFields(before, after, name, tenant);
    ctx.log.info('queue configuration changed through the admin API', {
      queue: name,
      tenant,
      policies,
      restart_needed: restart,
      removed,
    });
    return {
      after,
      body: {
        name,
        ...(tenant === undefined ? {} : { tenant }),
        config: configView(after, name, tenant),
        applied: { policies_put: policies.put, policies_deleted: policies.deleted },
        restart_needed: restart,
        removed,
      },
    };
  });
}

/** The file with `queues.<name>` replaced by `body`, its topology fields kept or checked unchanged. */
function withQueueEntry(before: CompiledConfig, raw: RawConfig, name: string, body: Record<string, unknown>): RawConfig {
  const current = (raw.queues?.[name] ?? {}) as Record<string, unknown>;
  const resolved = (name === '_default' ? before.defaultQueue : (before.queues.get(name) ?? before.defaultQueue)) as unknown as Record<
    string,
    unknown
  >;
  const changed = TOPOLOGY_FIELDS.filter(
    (field) => field in body && canonical(body[field]) !== canonical(current[field] ?? resolved[field]),
  );
  if (changed.length > 0) {
    throw new ApiError(
      422,
      'INVALID_REQUEST',
      `${changed.join(', ')} cannot change at runtime: ${changed.length === 1 ? 'it decides' : 'they decide'} which queues exist on the broker ` +
        'and how they are declared; edit the configuration file, then `stagecoach plan` shows what must be recreated',
      { fields: changed },
    );
  }
  const entry: Record<string, unknown> = { ...body };
  for (const field of TOPOLOGY_FIELDS) if (!(field in body) && current[field] !== undefined) entry[field] = current[field];
  return { ...raw, queues: { ...raw.queues, [name]: entry as QueueConfig } };
}

/** The file with one tenant's own settings of `name` replaced by `body` (settings only). */
function withTenantEntry(before: CompiledConfig, raw: RawConfig, name: string, tenant: string, body: Record<string, unknown>): RawConfig {
  const others = Object.keys(body).filter((key) => !(SETTING_KEYS as readonly string[]).includes(key));
  if (others.length > 0) {
    throw new ApiError(
      422,
      'INVALID_REQUEST',
      `a tenant's own configuration of a queue holds its settings only (${SETTING_KEYS.join(', ')}), not ${others.join(', ')}`,
      { fields: others },
    );
  }
  checkTenant(before, tenant);
  const tenants = (raw.tenants ?? []).map((entry): string | TenantConfig => {
    const slug = typeof entry === 'string' ? entry : entry.name;
    if (slug !== tenant) return entry;
    const own: TenantConfig = typeof entry === 'string' ? { name: entry } : { ...entry };
    const queues = { ...own.queues };
    if (Object.keys(body).length === 0) delete queues[name];
    else queues[name] = body;
    return { ...own, queues };
  });
  return { ...raw, tenants };
}

/** The queue's own entry in a raw file: `queues.<name>`, or the tenant's own settings of it. */
export function ownEntry(raw: RawConfig, name: string, tenant: string | undefined): Record<string, unknown> {
  if (tenant === undefined) return (raw.queues?.[name] ?? {}) as Record<string, unknown>;
  const entry = (raw.tenants ?? []).find((t): t is TenantConfig => typeof t !== 'string' && t.name === tenant);
  return (entry?.queues?.[name] ?? {}) as Record<string, unknown>;
}

/** Fields the entry had and the replacement left out: they fall back to what the queue inherits, said in the answer. */
function droppedFields(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  return Object.keys(before)
    .filter((field) => !(field in after))
    .sort();
}

/** A tenant's own settings live in its `tenants` entry: it must have one. */
function checkTenant(config: CompiledConfig, tenant: string): void {
  if (!config.tenants.includes(tenant)) {
    throw new ApiError(404, 'NOT_FOUND', `tenant "${tenant}" is not configured (tenants in ${config.source})`);
  }
}

/** Stage-read fields whose effective value the change altered. */
function changedStageFields(before: CompiledConfig, after: CompiledConfig, name: string): string[] {
  const of = (config: CompiledConfig): Record<string, unknown> =>
    (name === '_default' ? config.defaultQueue : (config.queues.get(name) ?? config.defaultQueue)) as unknown as Record<string, unknown>;
  return STAGE_FIELDS.filter((field) => canonical(of(before)[field]) !== canonical(of(after)[field]));
}

/** Of a tenant's own settings, those the stages read when they start that the change altered. */
function changedTenantFields(before: CompiledConfig, after: CompiledConfig, name: string, tenant: string): string[] {
  const queue = name === '_default' ? '' : name;
  const [was, now] = [settingsFor(before, queue, tenant), settingsFor(after, queue, tenant)];
  return settingsEnforcedBy('stage start').filter((key) => canonical(was[key]) !== canonical(now[key]));
}

/** JSON with object keys sorted, for comparing values written in any key order. */
function canonical(value: unknown): string {
  return (
    JSON.stringify(value, (_key, v: unknown) =>
      v !== null && typeof v === 'object' && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)))
        : v,
    ) ?? 'undefined'
  );
}

/** Whether the queue's flow limits (`concurrency`, `rate_limit`) differ between two configurations. */
function limitsChanged(before: CompiledConfig, after: CompiledConfig, name: string, tenant: string | undefined): boolean {
  const queue = name === '_default' ? '' : name;
  const of = (config: CompiledConfig): string => {
    const settings = settingsFor(config, queue, tenant);
    return canonical(settingsEnforcedBy('flow tokens').map((key) => settings[key]));
  };
  return of(before) !== of(after) || name === '_default';
}
