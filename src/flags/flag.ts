/**
 * Broker flags: facts kept on the broker as the mere existence of an object, so that every
 * process (stages without management access or configure permission included) can read them
 * with a passive declare, and they outlive restarts of stages and of the broker. Every flag, its
 * object, who sets and reads it and what its absence means: docs/broker.md, "Broker flags".
 *
 * This file is the one place where a flag's name on the broker is made and read back. The names
 * are those existing brokers hold: they must stay byte for byte as they are.
 */

import { queueOfWord, queueWord } from '../util/queue-name.js';

/**
 * A queue state other than `active` (src/queue-state/queue-state.ts). `queue-paused` is per physical
 * queue; `queue-draining` per logical queue and tenant (it cuts the entry the general queue and
 * its variant queues share, so it has no variant).
 */
export type QueueFlag =
  { kind: 'queue-paused'; queue: string; tenant?: string; variant?: string } | { kind: 'queue-draining'; queue: string; tenant?: string };

/** A batch or tenant directive (src/directives/batch-directives.ts), obeyed by every stage. */
export type DirectiveFlag =
  { kind: 'batch-cancelled'; batch: string } | { kind: 'batch-paused'; batch: string } | { kind: 'tenant-paused'; tenant: string };

/** The flags that are durable fanout exchanges with nothing bound to them, made and removed on demand. */
export type MarkerFlag = QueueFlag | DirectiveFlag;

/** The lock of the administrative reads that hold messages: an exclusive queue, gone with its connection. */
export interface ReadLockFlag {
  kind: 'read-lock';
}

/** The scheduler's leadership (docs/schedules.md): an exclusive queue, held by the leader's connection, gone with it. */
export interface SchedulerLeaderFlag {
  kind: 'scheduler-leader';
}

/** Which admin server delivers the webhooks (docs/webhooks.md): an exclusive queue, held by its connection, gone with it. */
export interface WebhookDelivererFlag {
  kind: 'webhook-deliverer';
}

/** The flags held as exclusive queues. */
export type HeldFlag = ReadLockFlag | SchedulerLeaderFlag | WebhookDelivererFlag;

/**
 * A tenant is provisioned while its tenant exchange exists. Read only: the exchange is topology,
 * declared by `provision` and removed by `tenant retire`, so it is never set or cleared as a
 * flag, and {@link isFlagName} does not claim its name (`plan` must keep planning it).
 */
export interface TenantProvisionedFlag {
  kind: 'tenant-provisioned';
  tenant: string;
}

export type Flag = MarkerFlag | HeldFlag | TenantProvisionedFlag;
export type FlagKind = Flag['kind'];
/** The flag of a kind, e.g. `FlagOf<'batch-paused'>`. */
export type FlagOf<K extends FlagKind> = Extract<Flag, { kind: K }>;

/** Every kind, in the order docs/broker.md lists them. */
export const FLAG_KINDS: readonly FlagKind[] = [
  'queue-paused',
  'queue-draining',
  'batch-cancelled',
  'batch-paused',
  'tenant-paused',
  'read-lock',
  'scheduler-leader',
  'webhook-deliverer',
  'tenant-provisioned',
];

/** The broker object a flag is: an exchange (passive `exchange.declare`) or an exclusive queue. */
export function flagObject(flag: Pick<Flag, 'kind'>): 'exchange' | 'queue' {
  return flag.kind === 'read-lock' || flag.kind === 'scheduler-leader' || flag.kind === 'webhook-deliverer' ? 'queue' : 'exchange';
}

/** The heads of the directive names, after `<prefix>.`: what follows is the batch or the tenant. */
const DIRECTIVE_HEADS = {
  'batch-cancelled': 'batch-cancelled.',
  'batch-paused': 'batch-paused.',
  'tenant-paused': 'tenant-paused.',
} as const;

/**
 * The name of a flag's object under `prefix`:
 * - `<prefix>.state.paused.<queue>[.<tenant>[.<variant>]]`, `<prefix>.state.draining.<queue>[.<tenant>]`
 *   (a queue as its word, queueWord; tenants and variants have no dots, so a name says exactly which queue);
 * - `<prefix>.batch-cancelled.<batch>`, `<prefix>.batch-paused.<batch>`, `<prefix>.tenant-paused.<tenant>`
 *   (batch ids may hold dots: read back by the head);
 * - `<prefix>.read-lock`, `<prefix>.scheduler-leader`, `<prefix>.webhook-deliverer`; `<prefix>.tenant.<tenant>` (the tenant exchange).
 */
export function flagName(prefix: string, flag: Flag): string {
  switch (flag.kind) {
    case 'queue-paused':
      return [prefix, 'state', 'paused', queueWord(flag.queue), flag.tenant, flag.variant].filter((part) => part !== undefined).join('.');
    case 'queue-draining':
      return [prefix, 'state', 'draining', queueWord(flag.queue), flag.tenant].filter((part) => part !== undefined).join('.');
    case 'batch-cancelled':
    case 'batch-paused':
      return `${prefix}.${DIRECTIVE_HEADS[flag.kind]}${flag.batch}`;
    case 'tenant-paused':
      return `${prefix}.${DIRECTIVE_HEADS[flag.kind]}${flag.tenant}`;
    case 'read-lock':
      return `${prefix}.read-lock`;
    case 'scheduler-leader':
      return `${prefix}.scheduler-leader`;
    case 'webhook-deliverer':
      return `${prefix}.webhook-deliverer`;
    case 'tenant-provisioned':
      return `${prefix}.tenant.${flag.tenant}`;
  }
}

/**
 * Reads a name back into the flag it is, or undefined for any other name. Only the flags made on
 * demand are read back (markers and the read lock): a tenant exchange is topology first.
 */
export function parseFlagName(prefix: string, name: string): Exclude<Flag, TenantProvisionedFlag> | undefined {
  if (!name.startsWith(`${prefix}.`)) return undefined;
  const rest = name.slice(prefix.length + 1);
  if (rest === 'read-lock') return { kind: 'read-lock' };
  if (rest === 'scheduler-leader') return { kind: 'scheduler-leader' };
  if (rest === 'webhook-deliverer') return { kind: 'webhook-deliverer' };
  if (rest.startsWith('state.')) return parseQueueFlag(rest.slice('state.'.length));
  for (const kind of ['batch-cancelled', 'batch-paused'] as const) {
    if (rest.startsWith(DIRECTIVE_HEADS[kind])) return { kind, batch: rest.slice(DIRECTIVE_HEADS[kind].length) };
  }
  const tenantHead = DIRECTIVE_HEADS['tenant-paused'];
  if (rest.startsWith(tenantHead)) return { kind: 'tenant-paused', tenant: rest.slice(tenantHead.length) };
  return undefined;
}

function parseQueueFlag(rest: string): QueueFlag | undefined {
  const [state, word, tenant, variant, ...extra] = rest.split('.');
  if ((state !== 'paused' && state !== 'draining') || word === undefined || word === '' || extra.length > 0) return undefined;
  const queue = queueOfWord(word);
  if (state === 'draining') {
    if (variant !== undefined) return undefined;
    return { kind: 'queue-draining', queue, ...(tenant === undefined ? {} : { tenant }) };
  }
  return {
    kind: 'queue-paused',
    queue,
    ...(tenant === undefined ? {} : { tenant }),
    ...(variant === undefined ? {} : { variant }),
  };
}

/**
 * Whether `name` is a flag made on demand (a marker or the read lock): state, not topology.
 * `plan` leaves such names alone, and nothing declares them from the configuration.
 */
export function isFlagName(prefix: string, name: string): boolean {
  return parseFlagName(prefix, name) !== undefined;
}

/** The flags of the given kinds among `names` (e.g. a management listing of the exchanges), in their order. */
export function flagsIn<K extends FlagKind>(prefix: string, names: Iterable<string>, kinds: readonly K[]): Array<FlagOf<K>> {
  const wanted = new Set<FlagKind>(kinds);
  const found: Array<FlagOf<K>> = [];
  for (const name of names) {
    const flag = parseFlagName(prefix, name);
    if (flag !== undefined && wanted.has(flag.kind)) found.push(flag as FlagOf<K>);
  }
  return found;
}
