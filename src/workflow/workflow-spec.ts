import { StagecoachError } from '../errors/errors.js';
import type { CallbackName } from '../job/job.types.js';
import { isWorkflowSpec, type WorkflowJobSpec, type WorkflowKind, type WorkflowSpec, type WorkflowStep } from '../job/workflow.types.js';
import { validateRateLimitPolicy } from '../job/rate-limit-policy.js';
import { validateRetryPolicy } from '../retry/retry-policy.js';
import { CALLBACK_NAMES } from '../batch/batch-callbacks.js';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../job/wire-limits.js';
import { isQueueName, QUEUE_NAME_RULE } from '../util/queue-name.js';

/** How deep workflows may nest in each other (OJS asks for at least 3): a chain of groups of chains... */
export const MAX_WORKFLOW_DEPTH = 8;
/** Most jobs (steps and callbacks, nested ones included) in one workflow. */
export const MAX_WORKFLOW_JOBS = 1000;

/** A chain: its steps run one after another, each given the results of the one before (`parent_results`). */
export function chain(...steps: WorkflowStep[]): WorkflowSpec {
  return { type: 'chain', steps };
}

/** A group: its jobs run at once; it has ended when they all have, failed when one failed. */
export function group(...jobs: WorkflowStep[]): WorkflowSpec {
  return { type: 'group', jobs };
}

/**
 * A batch: a group with callbacks, run once its jobs have all ended, with every job's result and
 * outcome (`on_complete` always, `on_success` when none failed, `on_failure` when one did).
 */
export function batch(jobs: WorkflowStep[], callbacks: Partial<Record<CallbackName, WorkflowJobSpec>>): WorkflowSpec {
  return { type: 'batch', jobs, callbacks };
}

/** Fields a job step may have (WorkflowJobSpec): anything else is refused, not dropped. */
const JOB_KEYS: ReadonlySet<string> = new Set([
  'queue',
  'type',
  'args',
  'meta',
  'priority',
  'timeout',
  'retry',
  'enqueue_ttl',
  'headers',
  'rate_limit',
]);
const WORKFLOW_KEYS: ReadonlySet<string> = new Set(['type', 'name', 'steps', 'jobs', 'callbacks']);
const KINDS: ReadonlySet<string> = new Set(['chain', 'group', 'batch']);

/**
 * Checks a workflow's shape (docs/workflows.md) and returns it as stored: every job with its
 * queue, type and `args` (default `[]`), nothing unknown. Structure only: whether each queue is
 * configured, allows its type and takes the workflow's tenant is the starter's check.
 * @param where what carried it (`workflow`): every message starts with it and the path to the field.
 * @throws StagecoachError `INVALID_REQUEST` naming the first thing that is wrong.
 */
export function checkWorkflow(value: unknown, where = 'workflow'): WorkflowSpec {
  const counter = { jobs: 0 };
  const checked = checkNode(value, where, 1, counter);
  if (!isWorkflowSpec(checked)) invalid(`${where} must be a chain, group or batch, not a single job`);
  return checked;
}

function checkNode(value: unknown, where: string, depth: number, counter: { jobs: number }): WorkflowStep {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalid(`${where} must be an object, got ${describe(value)}`);
  const node = value as Record<string, unknown>;
  if (!Array.isArray(node.steps) && !Array.isArray(node.jobs)) return checkJob(node, where, counter);
  if (depth > MAX_WORKFLOW_DEPTH) invalid(`${where}: workflows nest at most ${MAX_WORKFLOW_DEPTH} deep`);
  for (const key of Object.keys(node)) {
    if (!WORKFLOW_KEYS.has(key)) invalid(`${where}: unknown field "${key}" (a workflow takes ${[...WORKFLOW_KEYS].join(', ')})`);
  }
  if (typeof node.type !== 'string' || !KINDS.has(node.type))
    invalid(`${where}: "type" must be "chain", "group" or "batch", got ${describe(node.type)}`);
  const kind = node.type as WorkflowKind;
  const field = kind === 'chain' ? 'steps' : 'jobs';
  const other = kind === 'chain' ? 'jobs' : 'steps';
  if (node[other] !== undefined) invalid(`${where}: a ${kind} has "${field}", not "${other}"`);
  const items = node[field];
  if (!Array.isArray(items) || items.length === 0) invalid(`${where}: "${field}" must be a non-empty array`);
  if (node.name !== undefined && (typeof node.name !== 'string' || node.name.length > 200)) {
    invalid(`${where}: "name" must be a string of at most 200 characters`);
  }
  const checked: WorkflowSpec = { type: kind, ...(node.name === undefined ? {} : { name: node.name as string }) };
  checked[field] = items.map((item, index) => checkNode(item, `${where}.${field}[${index}]`, depth + 1, counter));
  if (kind === 'batch') checked.callbacks = checkCallbackSteps(node.callbacks, `${where}.callbacks`, counter);
  else if (node.callbacks !== undefined) invalid(`${where}: only a batch has callbacks (a ${kind} has none)`);
  return checked;
}

function checkCallbackSteps(value: unknown, where: string, counter: { jobs: number }): Partial<Record<CallbackName, WorkflowJobSpec>> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    invalid(`${where}: a batch needs callbacks, an object with any of ${CALLBACK_NAMES.join(', ')}`);
  }
  const callbacks: Partial<Record<CallbackName, WorkflowJobSpec>> = {};
  for (const [name, spec] of Object.entries(value)) {
    if (!(CALLBACK_NAMES as readonly string[]).includes(name))
      invalid(`${where}: unknown callback "${name}" (expected ${CALLBACK_NAMES.join(', ')})`);
    if (spec === undefined) continue;
    if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) invalid(`${where}.${name} must be a job, got ${describe(spec)}`);
    callbacks[name as CallbackName] = checkJob(spec as Record<string, unknown>, `${where}.${name}`, counter);
  }
  if (Object.keys(callbacks).length === 0) invalid(`${where}: a batch names at least one callback (without any, use a group)`);
  return callbacks;
}

function checkJob(job: Record<string, unknown>, where: string, counter: { jobs: number }): WorkflowJobSpec {
  if (++counter.jobs > MAX_WORKFLOW_JOBS) invalid(`${where}: a workflow holds at most ${MAX_WORKFLOW_JOBS} jobs`);
  for (const key of Object.keys(job)) {
    if (key === 'unique' || key === 'scheduled_at') invalid(`${where}: "${key}" is not taken by a workflow step`);
    if (!JOB_KEYS.has(key)) invalid(`${where}: unknown field "${key}" (a job step takes ${[...JOB_KEYS].join(', ')})`);
  }
  if (!isQueueName(job.queue)) invalid(`${where}: "queue" must be a queue name (${QUEUE_NAME_RULE}), got ${describe(job.queue)}`);
  if (typeof job.type !== 'string' || job.type.length === 0) invalid(`${where}: "type" must be a non-empty string`);
  if (job.args !== undefined && !Array.isArray(job.args)) invalid(`${where}: "args" must be a JSON array, got ${describe(job.args)}`);
  if (job.meta !== undefined && (typeof job.meta !== 'object' || job.meta === null || Array.isArray(job.meta))) {
    invalid(`${where}: "meta" must be an object`);
  }
  for (const reserved of ['batch', 'workflow', 'parent_results_ref']) {
    if (job.meta !== undefined && reserved in (job.meta as object)) invalid(`${where}: "meta.${reserved}" is set by stagecoach`);
  }
  if (job.headers !== undefined) {
    if (typeof job.headers !== 'object' || job.headers === null || Array.isArray(job.headers))
      invalid(`${where}: "headers" must be an object`);
    for (const [name, header] of Object.entries(job.headers)) {
      if (name.toLowerCase().startsWith('x-ojs-'))
        invalid(`${where}: header "${name}" is reserved (x-ojs-* headers are set by stagecoach)`);
      if (!['string', 'number', 'boolean'].includes(typeof header))
        invalid(`${where}: header "${name}" must be a string, number or boolean`);
    }
  }
  if (job.priority !== undefined && !Number.isInteger(job.priority)) invalid(`${where}: "priority" must be an integer`);
  if (job.timeout !== undefined && !(typeof job.timeout === 'number' && job.timeout > 0))
    invalid(`${where}: "timeout" must be a positive number of seconds`);
  if (job.enqueue_ttl !== undefined && typeof job.enqueue_ttl !== 'string') invalid(`${where}: "enqueue_ttl" must be an ISO 8601 duration`);
  // INVALID_RETRY_POLICY as a job's would be (422 over HTTP).
  validateRetryPolicy(job.retry, `${where}.retry`);
  validateRateLimitPolicy(job.rate_limit, `${where}.rate_limit`);
  if (nestedDeeperThan(job, MAX_JSON_DEPTH - 4)) invalid(`${where}: nested deeper than ${MAX_JSON_DEPTH - 4} levels`);
  const checked: WorkflowJobSpec = { queue: job.queue, type: job.type, args: (job.args as unknown[] | undefined) ?? [] };
  for (const key of JOB_KEYS) {
    if (key !== 'queue' && key !== 'type' && key !== 'args' && job[key] !== undefined)
      (checked as unknown as Record<string, unknown>)[key] = job[key];
  }
  return checked;
}

function describe(value: unknown): string {
  return JSON.stringify(value)?.slice(0, 140) ?? String(value);
}

function invalid(message: string): never {
  throw new StagecoachError('INVALID_REQUEST', message);
}
