/**
 * `stagecoach/runtime`: for embedders who assemble stagecoach's long-running processes
 * themselves rather than through `StageGroup` and the `stagecoach` command: one stage's runner
 * and its isolation gate, the batch tracker and the fold it keeps, the workflow advancer that
 * rides on it, event publishing, queue-full
 * reporting, and which broker node a connection went to. A `StageGroup` (root entry,
 * `stagecoach`) is made of these; most programs need only it.
 */
import 'reflect-metadata';

// One stage's runner.
export { StageRunner, type StageRunnerOptions, type RunnerState, type StageRunnerStats } from './runner/stage-runner.js';
export { IsolationGate } from './runner/intake/isolation-gate.js';

// The batch tracker (`stagecoach tracker`) and its fold of the tracking stream.
export { Tracker, type TrackerOptions } from './tracker/tracker.js';
export { BatchFold, batchState, isComplete, jobState, type BatchCounts, type TrackedBatch, type TrackedJob } from './batch/batch-fold.js';
export { TrackingReader, ensureTrackingStream } from './tracking-stream/tracking-reader.js';
export type { TrackerPlugin, TrackerHost } from './tracker/tracker.js';

// Workflows (docs/workflows.md): the tracker plugin that advances them, their fold and states.
export { WorkflowAdvancer, type WorkflowAdvancerOptions } from './workflow/workflow-advancer.js';
export { WorkflowFold, type TrackedWorkflow } from './workflow/workflow-fold.js';
export { evaluate, type Evaluation, type NodeEval, type StepState, type WorkflowState } from './workflow/workflow-eval.js';
export { planOf, stepJobId, workflowCallbackId, type PlanNode } from './workflow/workflow-plan.js';
export { workflowView } from './workflow/workflow-views.js';
export { readWorkflows } from './workflow/read-workflows.js';
export { payloadOffloaderFor, PayloadOffloader } from './payload/payload-offloader.js';

// Events and queue-full reporting.
export { EventPublisher, type EventPublisherOptions } from './events/event-publisher.js';
export {
  QueueFullReporter,
  QueueFullThrottle,
  QUEUE_FULL_EVENT_INTERVAL_MS,
  type QueueFullSighting,
} from './events/queue-full-reporter.js';

// Broker nodes of a cluster.
export { nodeLabel, nodeOf, type BrokerNode } from './broker/broker-nodes.js';
