import type { CompiledConfig } from '../config/config.types.js';
import { parseBrokerName } from './names.js';
import type { BindingSpec, ExchangeSpec, QueueSpec, Topology } from './topology.types.js';

/**
 * Of a topology, what only a stage declares (see {@link stageDeclaredTopology}): its `suspect`
 * companions and their bindings from the delay ladder.
 */
export function suspectPart(config: Pick<CompiledConfig, 'prefix'>, topology: Topology): Topology {
  const suspect = suspectNames(config);
  return {
    exchanges: [],
    queues: topology.queues.filter((queue) => suspect(queue.name)),
    bindings: topology.bindings.filter((binding) => suspect(binding.destination)),
  };
}

/**
 * Of a topology, all but its {@link suspectPart}: what a pooled runner following the broker
 * declares for a tenant it learns of while it runs, its suspect part being declared on first use
 * (SuspectDeclaration).
 */
export function withoutSuspectPart(config: Pick<CompiledConfig, 'prefix'>, topology: Topology): Topology {
  const suspect = suspectNames(config);
  return {
    exchanges: topology.exchanges,
    queues: topology.queues.filter((queue) => !suspect(queue.name)),
    bindings: topology.bindings.filter((binding) => !suspect(binding.destination)),
  };
}

/** Whether a broker name is a `suspect` companion's. */
function suspectNames(config: Pick<CompiledConfig, 'prefix'>): (name: string) => boolean {
  // A cheap look first: parsing every name of every tenant's topology was a pooled start's cost.
  const start = `${config.prefix}.suspect.`;
  return (name) => name.startsWith(start) && parseBrokerName(config.prefix, name)?.kind === 'suspect';
}

/** Concatenates topologies, keeping the first declaration of each name and each binding. */
export function mergeTopologies(...parts: Topology[]): Topology {
  const exchanges = new Map<string, ExchangeSpec>();
  const queues = new Map<string, QueueSpec>();
  const bindings = new Map<string, BindingSpec>();
  for (const part of parts) {
    for (const exchange of part.exchanges) if (!exchanges.has(exchange.name)) exchanges.set(exchange.name, exchange);
    for (const queue of part.queues) if (!queues.has(queue.name)) queues.set(queue.name, queue);
    for (const binding of part.bindings) {
      const key = mergeKey(binding);
      if (!bindings.has(key)) bindings.set(key, binding);
    }
  }
  return { exchanges: [...exchanges.values()], queues: [...queues.values()], bindings: [...bindings.values()] };
}

/**
 * What makes two bindings the same declaration. The names and the routing key are joined with
 * NUL, which AMQP names never hold here (BrokerNames joins slugs with dots); only arguments go
 * through JSON: a key per binding, ten of them per tenant, is built on every `plan` and `provision`.
 */
function mergeKey(binding: BindingSpec): string {
  const args = binding.arguments;
  const match = args === undefined || Object.keys(args).length === 0 ? '' : JSON.stringify(args);
  return `${binding.source}\u0000${binding.destination}\u0000${binding.routingKey}\u0000${match}`;
}
