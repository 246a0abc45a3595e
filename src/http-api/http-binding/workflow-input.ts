import { StagecoachError } from '../../errors/errors.js';
import type { WorkflowJobSpec, WorkflowSpec, WorkflowStep } from '../../job/workflow.types.js';
import { readPushInput } from './push-input.js';

/** Fields of a workflow in a request; any other is refused, naming it. */
const WORKFLOW_FIELDS = new Set(['type', 'name', 'steps', 'jobs', 'callbacks', 'id']);

/**
 * A `POST /ojs/v1/workflows` body read into a workflow definition (docs/workflows.md, "Shapes
 * accepted"): openapi.yaml's WorkflowRequest, which the conformance suite sends, nested as
 * spec/ojs-workflows.md section 10 nests it: `{ type: "chain", steps }`, `{ type: "group" |
 * "batch", jobs, callbacks? }`, each step or job either a workflow of the same shape or an OJS job
 * as `POST /ojs/v1/jobs` takes it (`type`, `args`, `meta`, `options.queue`, `options.retry`,
 * `options.priority`, `options.timeout_ms`; a `name` is allowed and not kept). The binding's own
 * section 14 describes another shape, steps with `id` and `depends_on`: it is refused, with a
 * message that says so. A step may not be scheduled or unique (refused by checkWorkflow).
 * @throws StagecoachError `INVALID_REQUEST` naming the path of what is wrong.
 */
export function readWorkflowInput(body: unknown, tenant: string | undefined): { spec: WorkflowSpec; id?: string } {
  const spec = readNode(body, 'workflow', tenant, true) as WorkflowSpec;
  const id = (body as { id?: unknown }).id;
  if (id !== undefined && typeof id !== 'string') invalid('workflow: "id" must be a string');
  return { spec, ...(id === undefined ? {} : { id }) };
}

function readNode(value: unknown, where: string, tenant: string | undefined, top: boolean): WorkflowStep {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalid(`${where} must be a JSON object`);
  const node = value as Record<string, unknown>;
  const items = Array.isArray(node.steps) ? node.steps : Array.isArray(node.jobs) ? node.jobs : undefined;
  if (items === undefined) {
    if (top) invalid(`${where}: "type" must be "chain" (with "steps"), "group" or "batch" (with "jobs")`);
    return readJob(node, where, tenant);
  }
  if (items.some((item) => typeof item === 'object' && item !== null && 'depends_on' in item)) {
    invalid(
      `${where}: steps with "depends_on" (the binding's section 14 graph) are not taken; use "type": "chain" with "steps", "group" or "batch" with "jobs", nested (openapi.yaml WorkflowRequest)`,
    );
  }
  for (const key of Object.keys(node)) if (!WORKFLOW_FIELDS.has(key)) invalid(`${where}: unknown field "${key}"`);
  const field = Array.isArray(node.steps) ? 'steps' : 'jobs';
  const spec: Record<string, unknown> = { type: node.type };
  if (node.name !== undefined) spec.name = node.name;
  spec[field] = items.map((item, index) => readNode(item, `${where}.${field}[${index}]`, tenant, false));
  if (node.callbacks !== undefined) {
    if (typeof node.callbacks !== 'object' || node.callbacks === null || Array.isArray(node.callbacks)) {
      invalid(`${where}.callbacks must be an object`);
    }
    const callbacks: Record<string, WorkflowJobSpec> = {};
    for (const [name, callback] of Object.entries(node.callbacks)) {
      if (callback === undefined || callback === null) continue;
      callbacks[name] = readJob(callback as Record<string, unknown>, `${where}.callbacks.${name}`, tenant);
    }
    spec.callbacks = callbacks;
  }
  // The rest (the type's values, empty lists, callbacks of a group) is checkWorkflow's to refuse.
  return spec as unknown as WorkflowSpec;
}

function readJob(node: Record<string, unknown>, where: string, tenant: string | undefined): WorkflowJobSpec {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) invalid(`${where} must be a job object`);
  // A job's `name` (openapi.yaml WorkflowJobRequest) is taken and not kept.
  const job = { ...node };
  delete job.name;
  let input;
  try {
    input = readPushInput({ args: [], ...job }, tenant);
  } catch (err) {
    invalid(`${where}: ${(err as Error).message}`);
  }
  if (input.id !== undefined) invalid(`${where}: "id" is not taken: a step's id is derived from the workflow's`);
  const { spec } = input;
  if (spec.unique !== undefined) invalid(`${where}: "unique" is not taken by a workflow step`);
  if (spec.scheduled_at !== undefined) invalid(`${where}: "options.delay_until" is not taken by a workflow step`);
  return {
    queue: input.queue,
    type: spec.type,
    args: spec.args ?? [],
    ...(spec.meta === undefined || Object.keys(spec.meta).length === 0 ? {} : { meta: spec.meta }),
    ...(spec.priority === undefined ? {} : { priority: spec.priority }),
    ...(spec.timeout === undefined ? {} : { timeout: spec.timeout }),
    ...(spec.retry === undefined ? {} : { retry: spec.retry }),
  };
}

function invalid(message: string): never {
  throw new StagecoachError('INVALID_REQUEST', message);
}
