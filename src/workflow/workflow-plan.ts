import { callbackJobId, CALLBACK_NAMES } from '../batch/batch-callbacks.js';
import type { CallbackName } from '../job/job.types.js';
import { uuidv5 } from '../job/uuid-v5.js';
import { isWorkflowSpec, type WorkflowJobSpec, type WorkflowKind, type WorkflowSpec, type WorkflowStep } from '../job/workflow.types.js';

/**
 * Every step job id is a UUIDv5 in this namespace of `<workflow>/<path>`: the same step of the
 * same workflow always has the same id, whichever process publishes it and however often (fixed
 * here once; never change it, or a step published again across an upgrade would get a new id).
 */
export const WORKFLOW_STEP_NAMESPACE = '8f6b8f1e-3c0a-4b7e-9d52-2a61c4e7b0d3';
/** The namespace of workflow ids a handler's `ctx.emit` derives from its job id (the same on a retry). */
export const WORKFLOW_ID_NAMESPACE = '4e2a9c71-6b3d-4f08-a5e1-c97d20b8f614';

/**
 * One node of a workflow as the fold and the advancer walk it: the definition with, for every
 * job, its place (`path`) and its id. Paths: the root is `""`, a step or job `<parent>.<index>`
 * (`"1.0"`: the first job of the group that is the chain's second step), a batch's callback
 * `<batch>.<name>` (`"on_success"` for the root's).
 */
export interface PlanNode {
  path: string;
  kind: WorkflowKind | 'job' | 'callback';
  /** Its index among its parent's steps or jobs (0 for the root and callbacks). */
  index: number;
  name?: string;
  /** A job's or callback's spec and id. */
  spec?: WorkflowJobSpec;
  job?: string;
  /** A chain's steps, a group's or batch's jobs, in order. */
  children: PlanNode[];
  /** A batch's callbacks, in the order they are published. */
  callbacks: PlanNode[];
  /** A callback's name. */
  callback?: CallbackName;
}

/** The id of the job at `path` of workflow `workflow`. */
export function stepJobId(workflow: string, path: string): string {
  return uuidv5(`${workflow}/${path}`, WORKFLOW_STEP_NAMESPACE);
}

/**
 * The id of a batch's callback job: for the workflow's root, the batch's own callback id
 * (callbackJobId: a workflow is a batch, and its callbacks are the batch's); for a nested batch,
 * the same scheme under `<workflow>/<path>`.
 */
export function workflowCallbackId(workflow: string, batchPath: string, name: CallbackName): string {
  return callbackJobId(batchPath === '' ? workflow : `${workflow}/${batchPath}`, name);
}

/** The id of the `n`-th workflow a handler starts while running job `job` (the same at every attempt). */
export function emittedWorkflowId(job: string, n: number): string {
  return uuidv5(`${job}/workflow/${n}`, WORKFLOW_ID_NAMESPACE);
}

/** The workflow's nodes with their paths and job ids. */
export function planOf(workflow: string, spec: WorkflowSpec): PlanNode {
  return nodeOf(workflow, spec, '', 0);
}

function nodeOf(workflow: string, step: WorkflowStep, path: string, index: number): PlanNode {
  if (!isWorkflowSpec(step)) return { path, kind: 'job', index, spec: step, job: stepJobId(workflow, path), children: [], callbacks: [] };
  const items = (step.type === 'chain' ? step.steps : step.jobs) ?? [];
  const below = (i: string): string => (path === '' ? i : `${path}.${i}`);
  const callbacks: PlanNode[] = [];
  for (const name of CALLBACK_NAMES) {
    const spec = step.callbacks?.[name];
    if (spec === undefined) continue;
    callbacks.push({
      path: below(name),
      kind: 'callback',
      index: 0,
      spec,
      job: workflowCallbackId(workflow, path, name),
      children: [],
      callbacks: [],
      callback: name,
    });
  }
  return {
    path,
    kind: step.type,
    index,
    ...(step.name === undefined ? {} : { name: step.name }),
    children: items.map((item, i) => nodeOf(workflow, item, below(String(i)), i)),
    callbacks,
  };
}

/** Every job node (steps and callbacks) of the plan, depth first, in definition order. */
export function jobNodes(root: PlanNode): PlanNode[] {
  const out: PlanNode[] = [];
  const visit = (node: PlanNode): void => {
    if (node.job !== undefined) out.push(node);
    for (const child of node.children) visit(child);
    for (const callback of node.callbacks) visit(callback);
  };
  visit(root);
  return out;
}
