import { callbacksToRun } from '../batch/batch-callbacks.js';
import type { BatchCounts, BatchFold, TrackedBatch, TrackedJob } from '../batch/batch-fold.js';
import type { PlanNode } from './workflow-plan.js';

/**
 * A step's state (spec/ojs-workflows.md 4.4): `waiting` (not enqueued: its turn has not come),
 * `pending` (enqueued), `active` (its job ran and jobs it emitted are still in flight), then one
 * of `completed`, `failed`, `cancelled`.
 */
export type StepState = 'waiting' | 'pending' | 'active' | 'completed' | 'failed' | 'cancelled';

/** A workflow's state (spec/ojs-workflows.md 8.1). */
export type WorkflowState = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';

const ENDED: ReadonlySet<StepState> = new Set(['completed', 'failed', 'cancelled']);

/** One member's outcome, as a batch's callbacks see it (`meta.workflow.outcomes`). */
export interface MemberOutcome {
  index: number;
  state: StepState;
  job_id?: string;
  result?: unknown;
  error?: { type: string; message: string };
}

/** A job the workflow is to publish now, with what it is given. */
export interface DueStep {
  node: PlanNode;
  /** The results of the step before (spec/ojs-workflows.md 7): `parent_results`. */
  parentResults: unknown[];
  /** A callback's batch: every member's outcome, and its counts. */
  outcomes?: MemberOutcome[];
  counts?: BatchCounts;
  failed?: number;
}

/** A node's evaluation: its state, and what it hands on (its result). */
export interface NodeEval {
  node: PlanNode;
  state: StepState;
  /** A job's result; a chain's is its last step's; a group's, its members' in order. */
  result: unknown;
  error?: { type: string; message: string };
  /** Its job (a job or callback node). */
  job?: TrackedJob;
  children: NodeEval[];
  callbacks: NodeEval[];
  /** Jobs of its subtree(s) (counts summed over its jobs' lineages). */
  counts: BatchCounts;
}

/** What the fold knows of a workflow now, and what is due. */
export interface Evaluation {
  state: WorkflowState;
  root: NodeEval;
  /** Jobs to publish now (their turn came and they were not published). */
  publish: DueStep[];
  /** Jobs that will never run and were not published: recorded `cancelled`. */
  cancel: PlanNode[];
}

/** `run`: its turn came; `wait`: not yet; `skip`: it never will (a chain stopped, the workflow cancelled). */
type Mode = 'run' | 'wait' | 'skip';

/**
 * The state machine of a workflow, as a function of the fold (docs/workflows.md): nothing is kept
 * between two evaluations, so whichever process folds the stream, in whatever state it restarted,
 * derives the same states and the same due jobs from the same records. `published` adds job ids
 * the caller sent and has not read back yet (the advancer's own commits).
 */
export function evaluate(
  plan: PlanNode,
  batch: TrackedBatch | undefined,
  fold: Pick<BatchFold, 'jobs'>,
  published: ReadonlySet<string> = new Set(),
): Evaluation {
  const out: Evaluation = { state: 'pending', root: undefined as unknown as NodeEval, publish: [], cancel: [] };
  const cancelled = batch?.cancelled === true;
  const context: Context = { batch, fold, published, out };
  out.root = evalNode(plan, cancelled ? 'skip' : 'run', [], context);
  const anyPublished = plan.job !== undefined ? isPublished(plan, context) : someJob(out.root, (node) => isPublished(node.node, context));
  if (cancelled) out.state = 'cancelled';
  else if (ENDED.has(out.root.state)) out.state = out.root.state as WorkflowState;
  else out.state = anyPublished ? 'running' : 'pending';
  return out;
}

interface Context {
  batch: TrackedBatch | undefined;
  fold: Pick<BatchFold, 'jobs'>;
  published: ReadonlySet<string>;
  out: Evaluation;
}

function evalNode(node: PlanNode, mode: Mode, input: unknown[], context: Context): NodeEval {
  if (node.kind === 'job' || node.kind === 'callback') return evalJob(node, mode, input, context);
  if (node.kind === 'chain') return evalChain(node, mode, input, context);
  return evalGroup(node, mode, input, context);
}

function evalJob(node: PlanNode, mode: Mode, input: unknown[], context: Context, due?: Partial<DueStep>): NodeEval {
  const id = node.job as string;
  const job = context.fold.jobs.get(id);
  const counts = { ...(context.batch?.lineages?.get(id) ?? zero()) };
  const evaluation: NodeEval = {
    node,
    state: 'waiting',
    result: null,
    children: [],
    callbacks: [],
    counts,
    ...(job === undefined ? {} : { job }),
  };
  if (!isPublished(node, context)) {
    if (mode === 'skip') {
      context.out.cancel.push(node);
      evaluation.state = 'cancelled';
    } else if (mode === 'run') {
      context.out.publish.push({ node, parentResults: input, ...due });
      evaluation.state = 'pending';
    }
    return evaluation;
  }
  const final = job?.final;
  if (final === undefined || job?.cls === 'in_flight' || counts.in_flight > 0) {
    evaluation.state = final !== undefined && job?.cls !== 'in_flight' ? 'active' : 'pending';
    return evaluation;
  }
  if (final.outcome === 'completed') {
    evaluation.state = 'completed';
    evaluation.result = final.result ?? null;
  } else if (final.outcome === 'cancelled') evaluation.state = 'cancelled';
  else {
    evaluation.state = 'failed';
    if (final.error !== undefined) evaluation.error = final.error;
  }
  return evaluation;
}

function evalChain(node: PlanNode, mode: Mode, input: unknown[], context: Context): NodeEval {
  const children: NodeEval[] = [];
  let next = input;
  let stepMode: Mode = mode;
  for (const step of node.children) {
    const child = evalNode(step, stepMode, next, context);
    children.push(child);
    next = outputOf(child);
    // A step that failed or was cancelled ends the chain: what follows never runs.
    if (child.state === 'failed' || child.state === 'cancelled') stepMode = 'skip';
    else if (child.state !== 'completed' && stepMode === 'run') stepMode = 'wait';
  }
  const evaluation: NodeEval = {
    node,
    state: 'waiting',
    result: children.at(-1)?.result ?? null,
    children,
    callbacks: [],
    counts: sum(children),
  };
  const failed = children.find((child) => child.state === 'failed');
  if (children.every((child) => ENDED.has(child.state))) {
    evaluation.state = failed !== undefined ? 'failed' : children.some((child) => child.state === 'cancelled') ? 'cancelled' : 'completed';
  } else if (failed !== undefined && ENDED.has(failed.state)) evaluation.state = 'failed';
  else evaluation.state = runningState(children, mode);
  if (failed?.error !== undefined) evaluation.error = failed.error;
  return evaluation;
}

function evalGroup(node: PlanNode, mode: Mode, input: unknown[], context: Context): NodeEval {
  const children = node.children.map((member) => evalNode(member, mode, input, context));
  const evaluation: NodeEval = {
    node,
    state: 'waiting',
    result: children.map((child) => child.result),
    children,
    callbacks: [],
    counts: sum(children),
  };
  const ended = children.every((child) => ENDED.has(child.state));
  const failed = children.filter((child) => child.state === 'failed').length;
  if (node.kind === 'batch') {
    const outcomes: MemberOutcome[] = children.map((child, index) => ({
      index,
      state: child.state,
      ...(child.node.job === undefined ? {} : { job_id: child.node.job }),
      ...(child.state === 'completed' ? { result: child.result } : {}),
      ...(child.error === undefined ? {} : { error: child.error }),
    }));
    const fired = new Set<string>(
      ended && mode !== 'skip' ? callbacksToRun(specsOf(node), { cancelled: false, failed }).map(({ name }) => name) : [],
    );
    const due = { outcomes, counts: evaluation.counts, failed };
    for (const callback of node.callbacks) {
      const name = callback.callback as string;
      const callbackMode: Mode = mode === 'skip' || (ended && !fired.has(name)) ? 'skip' : ended ? 'run' : 'wait';
      evaluation.callbacks.push(evalJob(callback, callbackMode, evaluation.result as unknown[], context, due));
    }
    evaluation.counts = sum([...children, ...evaluation.callbacks]);
    const run = evaluation.callbacks.filter((callback) => fired.has(callback.node.callback as string));
    if (ended && evaluation.callbacks.every((callback) => ENDED.has(callback.state))) {
      // OJS 8.3: a batch's state is its callbacks' (its jobs' failures are what on_failure is for);
      // one cancelled before its callbacks ran is cancelled.
      if (run.some((callback) => callback.state === 'failed')) evaluation.state = 'failed';
      else evaluation.state = run.length === 0 && mode === 'skip' ? 'cancelled' : 'completed';
    } else evaluation.state = runningState([...children, ...evaluation.callbacks], mode);
    return evaluation;
  }
  if (ended) {
    evaluation.state = failed > 0 ? 'failed' : children.some((child) => child.state === 'cancelled') ? 'cancelled' : 'completed';
  } else evaluation.state = runningState(children, mode);
  return evaluation;
}

/** Not ended: `waiting` when nothing of it was enqueued, else `active` (or `pending` if nothing started yet). */
function runningState(children: readonly NodeEval[], mode: Mode): StepState {
  if (children.some((child) => child.state === 'active' || ENDED.has(child.state))) return 'active';
  if (children.some((child) => child.state === 'pending')) return 'pending';
  return mode === 'wait' ? 'waiting' : 'pending';
}

/** What a node hands the step after it as `parent_results`: a group's results, or the node's one result. */
export function outputOf(evaluation: NodeEval): unknown[] {
  return evaluation.node.kind === 'group' || evaluation.node.kind === 'batch' ? (evaluation.result as unknown[]) : [evaluation.result];
}

function isPublished(node: PlanNode, context: Context): boolean {
  const id = node.job as string;
  if (context.published.has(id)) return true;
  const job = context.fold.jobs.get(id);
  return job !== undefined && (job.created || job.reports.length > 0);
}

function someJob(evaluation: NodeEval, test: (node: NodeEval) => boolean): boolean {
  if (evaluation.node.job !== undefined && test(evaluation)) return true;
  return [...evaluation.children, ...evaluation.callbacks].some((child) => someJob(child, test));
}

function specsOf(node: PlanNode): Parameters<typeof callbacksToRun>[0] {
  const specs: Record<string, { queue: string; type: string }> = {};
  for (const callback of node.callbacks)
    if (callback.callback !== undefined && callback.spec !== undefined) specs[callback.callback] = callback.spec;
  return specs;
}

function zero(): BatchCounts {
  return { known: 0, completed: 0, failed: 0, dead: 0, discarded: 0, cancelled: 0, in_flight: 0 };
}

function sum(children: readonly NodeEval[]): BatchCounts {
  const total = zero();
  for (const child of children) for (const key of Object.keys(total) as Array<keyof BatchCounts>) total[key] += child.counts[key];
  return total;
}
