import { isStagecoachPolicy, policyTarget } from '../topology/queue-policies.js';
import { isFlagName } from '../flags/flag.js';
import { parseBrokerName } from '../topology/names.js';
import { QueueStates } from '../queue-state/queue-state.js';
import type { BindingSpec, QueueSpec } from '../topology/topology.types.js';
import type { BrokerBinding, BrokerExchange, BrokerPolicy, BrokerQueue } from '../broker-management/management-client.js';
import type { BrokerInventory } from './broker-inventory.js';
import type { DesiredState } from './desired-state.js';
import type { Plan, PlanChange, QueueStateName } from './plan.types.js';

export { APPLIED } from './plan.types.js';
export type { ChangeAction, ChangeKind, Plan, PlanChange, PlanStates, QueueStateName } from './plan.types.js';

/**
 * The difference between what the configuration wants and what the broker holds under the
 * prefix. Pure: `readInventory` and `desiredState` gather the two sides.
 *
 * A draining queue's entry binding is missing on purpose (new jobs go to `unroutable`): it is not
 * planned back while its drain marker exists. The markers themselves are state, not topology,
 * and so are batch and tenant directives and the parked queues they make (batch-directives.ts).
 */
export function planChanges(desired: DesiredState, inventory: BrokerInventory): Plan {
  const prefix = desired.prefix;
  const configured = new Set(desired.tenants);
  // Broker flags (markers, the read lock: src/flags/flag.ts) are state made on demand, not topology.
  const ignored = (name: string): boolean => desired.ignored.has(name) || isFlagName(prefix, name);
  const tenantOf = (name: string): string | undefined => parseBrokerName(prefix, name)?.tenant;
  const userTenant = (user: string): string | undefined => {
    for (const role of ['producer', 'stage']) if (user.startsWith(`${prefix}.${role}.`)) return user.slice(prefix.length + role.length + 2);
    return undefined;
  };

  // Tenants: configured ones whose exchange is missing, and tenants the broker knows that the
  // configuration does not (by their exchange, any object of theirs, or their users).
  const onBroker = new Set<string>();
  for (const name of [...inventory.exchanges.map((e) => e.name), ...inventory.queues.map((q) => q.name)]) {
    const tenant = ignored(name) ? undefined : tenantOf(name);
    if (tenant !== undefined) onBroker.add(tenant);
  }
  for (const user of inventory.users) {
    const tenant = userTenant(user);
    if (tenant !== undefined) onBroker.add(tenant);
  }
  const exchangeNames = new Set(inventory.exchanges.map((e) => e.name));
  const missingTenants = desired.tenants.filter((tenant) => !exchangeNames.has(`${prefix}.tenant.${tenant}`));
  const extraTenants = [...onBroker].filter((tenant) => !configured.has(tenant)).sort();
  const extra = new Set(extraTenants);
  const ofExtraTenant = (name: string): boolean => {
    const tenant = tenantOf(name);
    return tenant !== undefined && extra.has(tenant);
  };

  // Counted in one pass over the inventory: a pass per extra tenant was quadratic when thousands
  // of tenants left the configuration at once.
  const held = new Map<string, { queues: number; exchanges: number; users: number }>(
    extraTenants.map((tenant) => [tenant, { queues: 0, exchanges: 0, users: 0 }]),
  );
  // Only the dropped tenants are counted: a configured tenant's objects find no entry.
  const countOf = (tenant: string | undefined) => (tenant === undefined ? undefined : held.get(tenant));
  for (const q of inventory.queues) {
    const counts = countOf(tenantOf(q.name));
    if (counts !== undefined) counts.queues++;
  }
  for (const e of inventory.exchanges) {
    const counts = countOf(tenantOf(e.name));
    if (counts !== undefined) counts.exchanges++;
  }
  for (const u of inventory.users) {
    const counts = countOf(userTenant(u));
    if (counts !== undefined) counts.users++;
  }
  const changes: PlanChange[] = [];
  for (const tenant of extraTenants) {
    const { queues, exchanges, users } = held.get(tenant) ?? { queues: 0, exchanges: 0, users: 0 };
    changes.push({
      kind: 'tenant',
      action: 'retire',
      name: tenant,
      tenant,
      detail:
        `not configured; on the broker: ${count(queues, 'queue')}, ${count(exchanges, 'exchange')}` +
        `${users > 0 ? `, ${count(users, 'user')}` : ''} (stagecoach tenant retire ${tenant} --strategy reject|discard|move)`,
    });
  }

  changes.push(...exchangeChanges(desired, inventory.exchanges, ignored, ofExtraTenant, tenantOf));
  changes.push(...queueChanges(desired, inventory.queues, ignored, ofExtraTenant, tenantOf));
  changes.push(...bindingChanges(desired, inventory, tenantOf, exchangeNames));
  changes.push(...policyChanges(desired, inventory.policies));
  const users = new Set(inventory.users);
  for (const user of desired.users) {
    if (!users.has(user)) changes.push({ kind: 'user', action: 'add', name: user, ...withTenant(userTenant(user)) });
  }

  return {
    prefix,
    vhost: inventory.vhost,
    tenants: { configured: [...desired.tenants], missing: missingTenants, extra: extraTenants },
    changes,
    states: { queues: statesOf(prefix, exchangeNames) },
  };
}

function statesOf(prefix: string, exchangeNames: Iterable<string>): Record<string, QueueStateName> {
  const states = new QueueStates(prefix, exchangeNames);
  const queues: Record<string, QueueStateName> = {};
  for (const queue of [...states.pausedQueues].sort()) queues[queue] = 'paused';
  for (const queue of [...states.drainingQueues].sort()) queues[queue] = 'draining';
  return queues;
}

function exchangeChanges(
  desired: DesiredState,
  actual: BrokerExchange[],
  ignored: (name: string) => boolean,
  ofExtraTenant: (name: string) => boolean,
  tenantOf: (name: string) => string | undefined,
): PlanChange[] {
  const changes: PlanChange[] = [];
  const byName = new Map(actual.map((exchange) => [exchange.name, exchange]));
  const wantedNames = new Set<string>();
  for (const wanted of desired.topology.exchanges) {
    wantedNames.add(wanted.name);
    const current = byName.get(wanted.name);
    const tenant = withTenant(tenantOf(wanted.name));
    if (current === undefined) {
      changes.push({ kind: 'exchange', action: 'add', name: wanted.name, ...tenant, wanted });
      continue;
    }
    const differences: string[] = [];
    if (current.type !== wanted.type) differences.push(`type ${current.type} -> ${wanted.type}`);
    if (current.durable !== wanted.durable) differences.push(`durable ${current.durable} -> ${wanted.durable}`);
    const alternate = current.arguments['alternate-exchange'];
    if ((alternate ?? undefined) !== wanted.alternateExchange) {
      differences.push(`alternate exchange ${show(alternate)} -> ${show(wanted.alternateExchange)}`);
    }
    if (differences.length > 0) {
      changes.push({ kind: 'exchange', action: 'recreate', name: wanted.name, ...tenant, detail: differences.join(', '), wanted, current });
    }
  }
  for (const current of actual) {
    if (wantedNames.has(current.name) || ignored(current.name) || ofExtraTenant(current.name)) continue;
    changes.push({
      kind: 'exchange',
      action: 'retire',
      name: current.name,
      ...withTenant(tenantOf(current.name)),
      detail: 'not in the configuration',
      current,
    });
  }
  return changes;
}

/** Queue arguments that used to carry settings now held by policies (a queue declared before keeps them). */
const SETTINGS_ARGUMENTS: Readonly<Record<string, string>> = {
  'x-max-length': 'max_size',
  'x-max-length-bytes': 'max_size_bytes',
  'x-overflow': 'overflow_policy',
};

function queueChanges(
  desired: DesiredState,
  actual: BrokerQueue[],
  ignored: (name: string) => boolean,
  ofExtraTenant: (name: string) => boolean,
  tenantOf: (name: string) => string | undefined,
): PlanChange[] {
  const changes: PlanChange[] = [];
  const byName = new Map(actual.map((queue) => [queue.name, queue]));
  const wantedNames = new Set<string>();
  const compare = (wanted: QueueSpec, current: BrokerQueue): void => {
    const differences: string[] = [];
    if (current.durable !== wanted.durable) differences.push(`durable ${current.durable} -> ${wanted.durable}`);
    const keys = new Set([...Object.keys(current.arguments), ...Object.keys(wanted.arguments)]);
    for (const key of [...keys].sort()) {
      const had = current.arguments[key];
      const wants = wanted.arguments[key];
      if (had !== undefined && wants !== undefined && String(had) === String(wants)) continue;
      const setting = SETTINGS_ARGUMENTS[key];
      differences.push(
        `argument ${key} ${show(had)} -> ${show(wants)}${setting !== undefined && wants === undefined ? ` (${setting} is a policy now)` : ''}`,
      );
    }
    if (differences.length > 0) {
      changes.push({
        kind: 'queue',
        action: 'recreate',
        name: wanted.name,
        ...withTenant(tenantOf(wanted.name)),
        detail: `recreate needed: ${differences.join(', ')}`,
        wanted,
        current,
      });
    }
  };
  for (const wanted of desired.topology.queues) {
    wantedNames.add(wanted.name);
    const current = byName.get(wanted.name);
    if (current === undefined)
      changes.push({ kind: 'queue', action: 'add', name: wanted.name, ...withTenant(tenantOf(wanted.name)), wanted });
    else compare(wanted, current);
  }
  // A stage declares these when it starts: absent is normal, present is checked like the rest.
  for (const wanted of desired.stageDeclared.queues) {
    wantedNames.add(wanted.name);
    const current = byName.get(wanted.name);
    if (current !== undefined) compare(wanted, current);
  }
  for (const current of actual) {
    if (wantedNames.has(current.name) || ignored(current.name) || ofExtraTenant(current.name)) continue;
    const parsed = parseBrokerName(desired.prefix, current.name);
    const hint =
      parsed?.queue === undefined
        ? ''
        : ` (stagecoach queue delete ${parsed.queue}${parsed.tenant === undefined ? '' : ` --tenant ${parsed.tenant}`} --strategy reject|discard|move)`;
    changes.push({
      kind: 'queue',
      action: 'retire',
      name: current.name,
      ...withTenant(parsed?.tenant),
      detail: `not in the configuration${hint}`,
      current,
    });
  }
  return changes;
}

function bindingChanges(
  desired: DesiredState,
  inventory: BrokerInventory,
  tenantOf: (name: string) => string | undefined,
  exchangeNames: ReadonlySet<string>,
): PlanChange[] {
  const changes: PlanChange[] = [];
  const actual = new Map<string, BindingSpec>();
  for (const binding of inventory.bindings) {
    const spec = fromBroker(binding);
    actual.set(bindingKey(spec), spec);
  }
  const wanted = new Map(desired.topology.bindings.map((binding) => [bindingKey(binding), binding]));
  // A stage's own bindings (its suspect queue's) are not added, and not stale either.
  const stageDeclared = new Set(desired.stageDeclared.bindings.map(bindingKey));
  for (const [key, binding] of wanted) {
    if (actual.has(key)) continue;
    // A draining queue's entry is unbound on purpose.
    if (binding.drainMarker !== undefined && exchangeNames.has(binding.drainMarker)) continue;
    changes.push({
      kind: 'binding',
      action: 'add',
      name: bindingName(binding),
      ...withTenant(tenantOf(binding.destination)),
      wanted: binding,
    });
  }
  // Only a stale route between objects the configuration wants is removed: the bindings of an
  // object to retire go with it, and routes to it keep working until then.
  const names = new Set([
    ...desired.topology.exchanges.map((e) => e.name),
    ...desired.topology.queues.map((q) => q.name),
    ...desired.stageDeclared.queues.map((q) => q.name),
  ]);
  for (const [key, binding] of actual) {
    if (wanted.has(key) || stageDeclared.has(key) || !names.has(binding.source) || !names.has(binding.destination)) continue;
    changes.push({
      kind: 'binding',
      action: 'remove',
      name: bindingName(binding),
      ...withTenant(tenantOf(binding.destination)),
      current: binding,
    });
  }
  return changes;
}

function policyChanges(desired: DesiredState, actual: BrokerPolicy[]): PlanChange[] {
  const changes: PlanChange[] = [];
  const ours = new Map(actual.filter((policy) => isStagecoachPolicy(desired.prefix, policy.name)).map((policy) => [policy.name, policy]));
  for (const wanted of desired.policies) {
    const current = ours.get(wanted.name);
    const tenant = withTenant(policyTenant(desired.prefix, wanted.name));
    if (current === undefined) {
      changes.push({ kind: 'policy', action: 'add', name: wanted.name, ...tenant, detail: showDefinition(wanted.definition), wanted });
      continue;
    }
    const differences: string[] = [];
    if (current.pattern !== wanted.pattern) differences.push(`pattern ${current.pattern} -> ${wanted.pattern}`);
    if (current.priority !== wanted.priority) differences.push(`priority ${current.priority} -> ${wanted.priority}`);
    if (current['apply-to'] !== wanted.applyTo) differences.push(`apply-to ${current['apply-to']} -> ${wanted.applyTo}`);
    const keys = new Set([...Object.keys(current.definition), ...Object.keys(wanted.definition)]);
    for (const key of [...keys].sort()) {
      if (String(current.definition[key]) !== String(wanted.definition[key])) {
        differences.push(`${key} ${show(current.definition[key])} -> ${show(wanted.definition[key])}`);
      }
    }
    if (differences.length > 0)
      changes.push({ kind: 'policy', action: 'change', name: wanted.name, ...tenant, detail: differences.join(', '), wanted, current });
  }
  const wantedNames = new Set(desired.policies.map((policy) => policy.name));
  for (const [name, current] of ours) {
    if (wantedNames.has(name)) continue;
    changes.push({
      kind: 'policy',
      action: 'remove',
      name,
      ...withTenant(policyTenant(desired.prefix, name)),
      detail: showDefinition(current.definition),
      current,
    });
  }
  return changes;
}

/** The tenant of a tenant's own policy (`<prefix>.queue.<queue word>.<tenant>`). */
function policyTenant(prefix: string, name: string): string | undefined {
  return policyTarget(prefix, name)?.tenant;
}

export function bindingKey(binding: BindingSpec): string {
  const args = binding.arguments ?? {};
  const keys = Object.keys(args);
  // Plain concatenation with NUL (never in stagecoach's names) where it can: JSON of every part
  // of some 100,000 bindings was a good part of `plan` at 10,000 tenants.
  const match = keys.length === 0 ? '' : JSON.stringify(keys.sort().map((key) => [key, String(args[key])]));
  return `${binding.source}\u0000${binding.destinationType}\u0000${binding.destination}\u0000${binding.routingKey}\u0000${match}`;
}

/** A binding as the management API lists it, in the form the topology uses (arguments as strings). */
export function fromBroker(binding: BrokerBinding): BindingSpec {
  const args: Record<string, string> = {};
  for (const [key, value] of Object.entries(binding.arguments)) args[key] = String(value);
  return {
    source: binding.source,
    destination: binding.destination,
    destinationType: binding.destination_type,
    routingKey: binding.routing_key,
    ...(Object.keys(args).length === 0 ? {} : { arguments: args }),
  };
}

function bindingName(binding: BindingSpec): string {
  const match = binding.arguments && Object.keys(binding.arguments).length > 0 ? ` ${JSON.stringify(binding.arguments)}` : '';
  return `${binding.source} -> ${binding.destination}${binding.routingKey === '' ? '' : ` [${binding.routingKey}]`}${match}`;
}

function showDefinition(definition: Record<string, unknown>): string {
  return Object.entries(definition)
    .map(([key, value]) => `${key}=${String(value)}`)
    .join(', ');
}

function show(value: unknown): string {
  return value === undefined || value === null ? '(none)' : String(value);
}

function count(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}

function withTenant(tenant: string | undefined): { tenant?: string } {
  return tenant === undefined ? {} : { tenant };
}
