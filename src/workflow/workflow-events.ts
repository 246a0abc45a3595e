import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import { EventPublisher } from '../events/event-publisher.js';
import type { EventType } from '../events/ojs-event.js';
import type { Logger } from '../logging/logger.js';
import type { Evaluation, WorkflowState } from './workflow-eval.js';
import { workflowKey, type TrackedWorkflow } from './workflow-fold.js';
import type { Advance } from './step-publisher.js';

const ENDED: ReadonlySet<WorkflowState> = new Set(['completed', 'failed', 'cancelled']);

/**
 * The workflow events (spec/ojs-workflows.md appendix B; docs/workflows.md, Events) on
 * `<prefix>.events`, published by the holder of the workflow lock as it sees a workflow move:
 * `workflow.started` (its first steps published), `workflow.completed` / `workflow.failed` /
 * `workflow.cancelled`, and `workflow.callback_fired` for each batch callback it publishes.
 * Subject: the workflow's id. Information, as every event is: at most once per holder of the lock;
 * a workflow that moved while the lock changed hands may be told of twice, or not at all.
 */
export class WorkflowEvents {
  private readonly events: EventPublisher;
  /** The state last told of (or found when the lock was taken), by workflow. */
  private readonly told = new Map<string, WorkflowState>();

  constructor(config: CompiledConfig, connection: AmqpConnection, log: Logger) {
    this.events = new EventPublisher(config, { source: 'stagecoach/tracker', log, connection: () => connection });
  }

  /** What a new holder of the lock finds (by workflowKey): not told again. */
  baseline(key: string, evaluation: Evaluation): void {
    this.told.set(key, evaluation.state);
  }

  /** Tells of the workflow's move since it was last seen, if it moved. */
  observe(workflow: TrackedWorkflow, evaluation: Evaluation): void {
    const key = workflowKey(workflow);
    const before = this.told.get(key) ?? 'pending';
    const now = evaluation.state;
    if (now === before) return;
    this.told.set(key, now);
    if (before === 'pending') this.publish('workflow.started', workflow, evaluation);
    if (ENDED.has(now)) this.publish(`workflow.${now}` as EventType, workflow, evaluation);
  }

  /** The batch callbacks an advance published. */
  fired(advances: readonly Advance[]): void {
    for (const { workflow, publish } of advances) {
      for (const due of publish) {
        if (due.node.callback === undefined) continue;
        void this.events.publish('workflow.callback_fired', workflow.id, {
          ...about(workflow),
          callback: due.node.callback,
          step: due.node.path,
          job_id: due.node.job,
        });
      }
    }
  }

  async close(): Promise<void> {
    await this.events.close();
  }

  private publish(type: EventType, workflow: TrackedWorkflow, evaluation: Evaluation): void {
    const root = evaluation.root;
    void this.events.publish(type, workflow.id, {
      ...about(workflow),
      state: evaluation.state,
      jobs: root.counts,
      ...(root.error === undefined ? {} : { error: root.error }),
    });
  }
}

function about(workflow: TrackedWorkflow): Record<string, unknown> {
  return {
    workflow_id: workflow.id,
    workflow_type: workflow.type,
    ...(workflow.name === undefined ? {} : { workflow_name: workflow.name }),
    ...(workflow.tenant === undefined ? {} : { tenant: workflow.tenant }),
  };
}
