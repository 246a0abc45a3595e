import type { CompiledConfig } from '../config/config.types.js';
import type { StageEndpoints } from '../topology/topology.types.js';

/** One logical queue as a column of the dashboard: where it sits in the pipeline and who touches it. */
export interface PipelineQueue {
  queue: string;
  scope: 'tenant' | 'shared';
  /** Variant names of a tenant-scoped queue with specialised queues, in configuration order. */
  variants: string[];
  /** Stages reading it (one queue per stage, but several stages may read the same queue). */
  read_by: string[];
  /** Stages emitting to it. */
  written_by: string[];
  /** Named in `queues` of the configuration (else implicit, or only found on the broker). */
  configured: boolean;
}

/**
 * The pipeline's logical queues in the order jobs flow through them, split by scope (the
 * dashboard shows shared queues apart from the tenants x queues matrix).
 *
 * Order: a topological order of the stage graph (an edge from each stage's input to each of its
 * outputs), sources first, ties broken by where a queue first appears in the configured stages,
 * so the columns read like the `stages` section. Queues on a cycle (a stage that feeds an earlier
 * one) follow in that same first-appearance order, since no order can put them all after their
 * producers. Then queues the configuration names that no stage touches, then queues found only on
 * the broker (`extra`: a stage no longer configured, an implicit queue), alphabetically: an
 * operator must see every queue that holds jobs, wherever it sits.
 */
export function pipelineOrder(
  config: CompiledConfig,
  stages: readonly StageEndpoints[],
  extra: ReadonlyMap<string, 'tenant' | 'shared'> = new Map(),
): { tenant: PipelineQueue[]; shared: PipelineQueue[] } {
  const seen: string[] = [];
  const see = (queue: string): void => {
    if (!seen.includes(queue)) seen.push(queue);
  };
  const next = new Map<string, Set<string>>();
  const readers = new Map<string, string[]>();
  const writers = new Map<string, string[]>();
  const add = (map: Map<string, string[]>, queue: string, stage: string): void => {
    const list = map.get(queue) ?? [];
    if (!list.includes(stage)) list.push(stage);
    map.set(queue, list);
  };
  for (const stage of stages) {
    see(stage.input);
    add(readers, stage.input, stage.name);
    for (const output of stage.outputs) {
      see(output);
      add(writers, output, stage.name);
      // A stage that re-queues to its own input adds no order.
      if (output !== stage.input) next.set(stage.input, (next.get(stage.input) ?? new Set()).add(output));
    }
  }

  const ordered = topologicalOrder(seen, next);
  for (const queue of config.queues.keys()) if (!ordered.includes(queue)) ordered.push(queue);
  for (const queue of [...extra.keys()].sort()) if (!ordered.includes(queue)) ordered.push(queue);

  const result = { tenant: [] as PipelineQueue[], shared: [] as PipelineQueue[] };
  for (const queue of ordered) {
    const resolved = config.queues.get(queue);
    const scope = resolved?.scope ?? extra.get(queue) ?? config.defaultQueue.scope;
    result[scope].push({
      queue,
      scope,
      variants: scope === 'tenant' ? Object.keys(resolved?.variants?.values ?? {}) : [],
      read_by: readers.get(queue) ?? [],
      written_by: writers.get(queue) ?? [],
      configured: resolved !== undefined,
    });
  }
  return result;
}

/** Kahn's algorithm, always taking the earliest-seen ready queue; what a cycle leaves is appended in seen order. */
function topologicalOrder(seen: readonly string[], next: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const indegree = new Map(seen.map((queue) => [queue, 0]));
  for (const targets of next.values()) for (const target of targets) indegree.set(target, (indegree.get(target) ?? 0) + 1);
  const order: string[] = [];
  const done = new Set<string>();
  for (;;) {
    const ready = seen.find((queue) => !done.has(queue) && indegree.get(queue) === 0);
    if (ready === undefined) break;
    done.add(ready);
    order.push(ready);
    for (const target of next.get(ready) ?? []) indegree.set(target, (indegree.get(target) ?? 0) - 1);
  }
  for (const queue of seen) if (!done.has(queue)) order.push(queue);
  return order;
}
