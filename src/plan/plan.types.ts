import type { BindingSpec, ExchangeSpec, PolicySpec, QueueSpec } from '../topology/topology.types.js';
import type { BrokerExchange, BrokerPolicy, BrokerQueue } from '../broker-management/management-client.js';

export type ChangeKind = 'tenant' | 'exchange' | 'queue' | 'binding' | 'policy' | 'user';

/**
 * - `add`, `change`, `remove`: `apply` carries them out (nothing of it deletes a job);
 * - `recreate`: an exchange or queue exists with other properties than the configuration's
 *   (queue arguments such as `x-max-priority` are fixed at declaration): it must be deleted and
 *   declared again, which `apply` never does on its own;
 * - `retire`: on the broker but not in the configuration (a tenant, a queue): removing it means
 *   deciding about its jobs, with `tenant retire` / `queue delete` and a strategy.
 */
export type ChangeAction = 'add' | 'change' | 'remove' | 'recreate' | 'retire';

/** The actions `apply` carries out. */
export const APPLIED: ReadonlySet<ChangeAction> = new Set(['add', 'change', 'remove']);

export interface PlanChange {
  kind: ChangeKind;
  action: ChangeAction;
  /** The object's name; for a binding `source -> destination [key]`. */
  name: string;
  /** The tenant the object belongs to, when it belongs to one. */
  tenant?: string;
  /** Why, in words (a `recreate`'s differences, a `retire`'s command). */
  detail?: string;
  /** What the configuration wants (add, change, recreate): an ExchangeSpec, QueueSpec, BindingSpec or PolicySpec. */
  wanted?: ExchangeSpec | QueueSpec | BindingSpec | PolicySpec;
  /** What the broker has (change, remove, recreate). */
  current?: BrokerExchange | BrokerQueue | BindingSpec | BrokerPolicy;
}

/** A queue state other than `active`, per physical queue. */
export type QueueStateName = 'paused' | 'draining';

/**
 * Queue states (OJS queue configuration 5.1) found on the broker: each paused physical queue, and
 * each draining logical queue by its general queue's name. Not configuration: shown, never changed
 * by `apply`.
 */
export interface PlanStates {
  queues: Readonly<Record<string, QueueStateName>>;
}

export interface Plan {
  prefix: string;
  vhost: string;
  tenants: { configured: string[]; missing: string[]; extra: string[] };
  changes: PlanChange[];
  states: PlanStates;
}
