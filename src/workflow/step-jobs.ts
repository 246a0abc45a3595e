import { callbackMeta } from '../batch/batch-callbacks.js';
import { routeFor } from '../broker/job-router.js';
import type { CompiledConfig } from '../config/config.types.js';
import { queueFor, variantOf } from '../config/queue-resolver.js';
import { createJob } from '../job/envelope.js';
import type { CallbackName, HeaderValue, Job } from '../job/job.types.js';
import { childTraceparent } from '../job/trace-context.js';
import { delayRoutingKey } from '../topology/delay-topology.js';
import { brokerNamesOf } from '../topology/names.js';
import type { DueStep } from './workflow-eval.js';
import type { TrackedWorkflow } from './workflow-fold.js';

/** What a step job carries of its workflow (`meta.workflow`). */
export interface StepMeta {
  id: string;
  /** Its place in the workflow (workflow-plan.ts): `"1.0"`, `"on_success"`. */
  step: string;
  name?: string;
  /** A batch callback's members, each with its state and its result or error. */
  outcomes?: DueStep['outcomes'];
}

/** A step job ready to send: its envelope, the AMQP headers it goes with, its trace. */
export interface StepJob {
  job: Job;
  headers: Record<string, HeaderValue>;
  traceparent: string;
}

/**
 * The envelope of a step that is due: the job its definition names, with the step's id, in the
 * workflow's batch and tenant, `parent_results` (the results of the step before), and
 * `meta.workflow`; a batch callback also gets `meta.batch_callback` as a batch's callbacks do.
 * @throws what createJob and routeFor throw for a step that cannot be sent (a type its queue does
 *   not allow, a queue not configured under `strict_queues`): the step fails, the caller records it.
 */
export function stepJob(config: CompiledConfig, workflow: TrackedWorkflow, due: DueStep): StepJob {
  const { node } = due;
  const spec = node.spec;
  if (spec === undefined || node.job === undefined) throw new TypeError(`workflow step "${node.path}" is not a job`);
  const meta: Record<string, unknown> = { ...spec.meta };
  const step: StepMeta = { id: workflow.id, step: node.path, ...(workflow.name === undefined ? {} : { name: workflow.name }) };
  if (due.outcomes !== undefined) step.outcomes = due.outcomes;
  meta.workflow = step;
  if (node.callback !== undefined && due.counts !== undefined) {
    const end = { cancelled: false, failed: due.failed ?? 0 };
    meta.batch_callback = callbackMeta({ id: workflow.id, ...tenantOf(workflow) }, node.callback as CallbackName, end, due.counts);
  }
  const { queue, headers, ...jobSpec } = spec;
  const job = createJob({ ...jobSpec, meta }, { queue, ...tenantOf(workflow), batch: workflow.id });
  job.id = node.job;
  job.parent_results = due.parentResults;
  // Refused here, not by the broker: a type its queue does not allow, a tenant it needs.
  routeFor(config, job);
  return { job, headers: { ...headers }, traceparent: childTraceparent(workflow.traceparent) };
}

/**
 * Where a step enters the broker: the `due` companion of the physical queue the entry exchange
 * would pick, through the delay ladder with no delay (routeFor's scheduled path). A due queue is
 * unbounded: in an AMQP transaction a publish a full `reject-publish` queue refuses is dropped
 * without a word (RabbitMQ commits it anyway), and a step must never be lost so. Stages read
 * the due queue beside the main one, as they do retries.
 */
export function dueRoute(
  config: CompiledConfig,
  job: Job,
  headers: Readonly<Record<string, unknown>>,
): { exchange: string; routingKey: string } {
  const names = brokerNamesOf(config);
  const queue = queueFor(config, job.queue);
  const due = queue.scope === 'shared' ? names.dueQueue(job.queue) : names.dueQueue(job.queue, job.tenant, variantOf(queue, headers));
  return { exchange: names.retry, routingKey: delayRoutingKey(0, due) };
}

function tenantOf(workflow: TrackedWorkflow): { tenant?: string } {
  return workflow.tenant === undefined ? {} : { tenant: workflow.tenant };
}
