import type { CompiledConfig, ResolvedQueueConfig, ResolvedQueueSettings } from '../config/config.types.js';
import { settingsFor } from '../config/queue-resolver.js';
import { parseDuration } from '../util/duration.js';
import { queueOfWord, queueWord } from '../util/queue-name.js';
import { provisionQueues } from './build-topology.js';
import { sharedQueueType } from './queue-type.js';
import type { PolicySpec, StageEndpoints } from './topology.types.js';

/**
 * The queue settings the broker enforces, as RabbitMQ policies: pure data from configuration.
 *
 * Why policies: `max_size` and friends used to be queue arguments, and arguments are fixed when
 * a queue is declared; a changed value made every re-declaration fail. A policy changes in place:
 * the broker applies the new definition to the existing queue at once, with no queue deleted and
 * no stage restarted.
 *
 * Per logical queue, at most two policies, named after what they govern:
 * - `<prefix>.queue.<queue>`: `max-length`, `max-length-bytes`, `overflow` on the main physical
 *   queues (every tenant's general and variant queues, or the one shared queue), never on the
 *   `due` and `suspect` companions, which must stay unbounded (docs/failures.md);
 * - `<prefix>.dead.<queue>`: `message-ttl` (retention: an expired dead letter is dropped),
 *   `max-length` with `drop-head` on the dead-letter queues.
 *
 * A tenant with settings of its own (OJS queue configuration 8.5) gets
 * `<prefix>.queue.<queue>.<tenant>` and `<prefix>.dead.<queue>.<tenant>` with every key repeated,
 * because RabbitMQ applies one policy per queue: the one of highest priority. The logical queue's
 * pattern also leaves such tenants out, so a tenant whose settings are "unlimited" (no policy:
 * RabbitMQ refuses an empty one) is not caught by it either. Patterns are anchored, prefix-scoped
 * and escape the dots, so the policies of one prefix never match another prefix's queues, nor
 * `conversions2` for `conversions`.
 */

/** Priority of a logical queue's policies: above the default 0 of a broker-wide catch-all policy. */
export const QUEUE_POLICY_PRIORITY = 100;
/** Priority of the prefix's classic-queue version policy: below every queue's own, above a broker-wide default 0. */
export const VERSION_POLICY_PRIORITY = 99;
/**
 * The classic queue version stagecoach's classic queues run on (RabbitMQ 3.10 and up): version 2
 * writes a persistent message and its index entry at about half the broker CPU of version 1, and
 * confirms it sooner (docs/performance.md). A policy key, not the `x-queue-version` argument:
 * the broker refuses to declare an existing queue with an argument it was not created with
 * (PRECONDITION_FAILED), but converts a queue in place, messages kept, when a policy changes it.
 */
export const CLASSIC_QUEUE_VERSION = 2;
/** Priority of a tenant's own policies: above its logical queue's. */
export const TENANT_POLICY_PRIORITY = 101;

/** The policies of every queue `provision` declares: configured queues and those the stages use. */
export function queuePolicies(config: CompiledConfig, stages: readonly StageEndpoints[]): PolicySpec[] {
  const version = versionPolicy(config);
  return [...(version === undefined ? [] : [version]), ...provisionQueues(config, stages).flatMap((queue) => policiesOf(config, queue))];
}

/**
 * `<prefix>.queues`: the classic queue version for every queue of the prefix that no policy of
 * its own governs (companions, the delay ladder, unroutable, queues without settings; the queues
 * with settings have the key in their own policy, since the broker applies one policy per queue).
 * Not on the tracking stream, nor at all when any queue is quorum (then so is the ladder): a
 * quorum queue takes no `queue-version`.
 */
function versionPolicy(config: CompiledConfig): PolicySpec | undefined {
  if (sharedQueueType(config) !== 'classic') return undefined;
  const p = escape(config.prefix);
  return policy(versionPolicyName(config.prefix), `^${p}\\.(?!tracking$)`, VERSION_POLICY_PRIORITY, {
    'queue-version': CLASSIC_QUEUE_VERSION,
  });
}

function versionPolicyName(prefix: string): string {
  return `${prefix}.queues`;
}

/** Whether a policy name is one stagecoach manages under `prefix` (so `apply` may change or remove it). */
export function isStagecoachPolicy(prefix: string, name: string): boolean {
  return name.startsWith(`${prefix}.queue.`) || name.startsWith(`${prefix}.dead.`) || name === versionPolicyName(prefix);
}

/**
 * What a stagecoach policy governs, read back from its name (`<prefix>.queue.<queue>[.<tenant>]`,
 * `<prefix>.dead.<queue>[.<tenant>]`): the logical queue, the tenant of a tenant's own settings,
 * and whether it bounds the dead letters. Undefined for any other name.
 */
export function policyTarget(prefix: string, name: string): { queue: string; tenant?: string; dead: boolean } | undefined {
  if (!isStagecoachPolicy(prefix, name)) return undefined;
  const [kind, word, tenant, ...rest] = name.slice(prefix.length + 1).split('.');
  if (word === undefined || rest.length > 0) return undefined;
  return { queue: queueOfWord(word), ...(tenant === undefined ? {} : { tenant }), dead: kind === 'dead' };
}

function policiesOf(config: CompiledConfig, queue: ResolvedQueueConfig): PolicySpec[] {
  // A queue with settings of its own is governed by its policy alone: it carries the version too.
  const policy = (name: string, pattern: string, priority: number, definition: Record<string, string | number>): PolicySpec | undefined =>
    settingsPolicy(name, pattern, priority, queue.type === 'classic' ? withVersion(definition) : definition);
  const p = escape(config.prefix);
  const word = queueWord(queue.name);
  const q = escape(word);
  const base = settingsFor(config, queue.name);
  if (queue.scope === 'shared') {
    return [
      policy(`${config.prefix}.queue.${word}`, `^${p}\\.queue\\.${q}$`, QUEUE_POLICY_PRIORITY, workDefinition(base)),
      policy(`${config.prefix}.dead.${word}`, `^${p}\\.dead\\.${q}$`, QUEUE_POLICY_PRIORITY, deadDefinition(base)),
    ].filter((spec): spec is PolicySpec => spec !== undefined);
  }

  const policies: Array<PolicySpec | undefined> = [];
  const work = { base: workDefinition(base), own: [] as string[] };
  const dead = { base: deadDefinition(base), own: [] as string[] };
  for (const tenant of config.tenants) {
    if (!config.queueSettings.tenants.has(tenant)) continue;
    const settings = settingsFor(config, queue.name, tenant);
    const t = escape(tenant);
    const ownWork = workDefinition(settings);
    if (!sameDefinition(ownWork, work.base)) {
      work.own.push(t);
      policies.push(
        policy(`${config.prefix}.queue.${word}.${tenant}`, `^${p}\\.queue\\.${q}\\.${t}(?:\\.[^.]+)?$`, TENANT_POLICY_PRIORITY, ownWork),
      );
    }
    const ownDead = deadDefinition(settings);
    if (!sameDefinition(ownDead, dead.base)) {
      dead.own.push(t);
      policies.push(policy(`${config.prefix}.dead.${word}.${tenant}`, `^${p}\\.dead\\.${q}\\.${t}$`, TENANT_POLICY_PRIORITY, ownDead));
    }
  }
  // Any tenant (configured or provisioned later) but those with their own: the tenant, then an optional variant.
  const others = (own: string[], end: string): string => (own.length === 0 ? '' : `(?!(?:${own.join('|')})${end})`);
  policies.unshift(
    policy(
      `${config.prefix}.queue.${word}`,
      `^${p}\\.queue\\.${q}\\.${others(work.own, '(?:\\.|$)')}[^.]+(?:\\.[^.]+)?$`,
      QUEUE_POLICY_PRIORITY,
      work.base,
    ),
    policy(`${config.prefix}.dead.${word}`, `^${p}\\.dead\\.${q}\\.${others(dead.own, '$')}[^.]+$`, QUEUE_POLICY_PRIORITY, dead.base),
  );
  return policies.filter((spec): spec is PolicySpec => spec !== undefined);
}

/** The main queue's bounds; nothing when unbounded (then `overflow` means nothing either). */
export function workDefinition(settings: ResolvedQueueSettings): Record<string, string | number> {
  const definition: Record<string, string | number> = {};
  if (settings.max_size !== undefined) definition['max-length'] = settings.max_size;
  if (settings.max_size_bytes !== undefined) definition['max-length-bytes'] = settings.max_size_bytes;
  if (Object.keys(definition).length > 0) definition.overflow = settings.overflow_policy === 'drop_oldest' ? 'drop-head' : 'reject-publish';
  return definition;
}

/** The dead-letter queue's retention: dead letters have no dead-letter route, so what expires or overflows is dropped. */
export function deadDefinition(settings: ResolvedQueueSettings): Record<string, string | number> {
  const definition: Record<string, string | number> = {};
  if (settings.dead_letter_ttl !== undefined) definition['message-ttl'] = Math.round(parseDuration(settings.dead_letter_ttl) ?? 0);
  if (settings.dead_letter_max_size !== undefined) {
    definition['max-length'] = settings.dead_letter_max_size;
    definition.overflow = 'drop-head';
  }
  return definition;
}

function policy(name: string, pattern: string, priority: number, definition: Record<string, string | number>): PolicySpec | undefined {
  // RabbitMQ refuses a policy without keys ("no policy provided").
  if (Object.keys(definition).length === 0) return undefined;
  return { name, pattern, applyTo: 'queues', priority, definition };
}

/** A queue's settings policy: none without a setting (the prefix's version policy covers it then). */
function settingsPolicy(
  name: string,
  pattern: string,
  priority: number,
  definition: Record<string, string | number>,
): PolicySpec | undefined {
  return Object.keys(definition).some((key) => key !== 'queue-version') ? policy(name, pattern, priority, definition) : undefined;
}

function withVersion(definition: Record<string, string | number>): Record<string, string | number> {
  return Object.keys(definition).length === 0 ? definition : { ...definition, 'queue-version': CLASSIC_QUEUE_VERSION };
}

function sameDefinition(a: Record<string, string | number>, b: Record<string, string | number>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}

/** A name as a literal inside a regular expression (RabbitMQ matches policy patterns with PCRE). */
export function escape(name: string): string {
  return name.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
}
