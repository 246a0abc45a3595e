import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Channel, Options } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import { commit, selectTx } from '../broker/tx-channel.js';
import type { CompiledConfig } from '../config/config.types.js';
import { StagecoachError } from '../errors/errors.js';
import { toWire } from '../job/amqp-mapping.js';
import { toJobError } from '../job/job-error.js';
import { uuidv7 } from '../job/uuid-v7.js';
import type { Logger } from '../logging/logger.js';
import type { PayloadOffloader } from '../payload/payload-offloader.js';
import { formatPayloadRef, payloadTenant } from '../payload/payload-ref.js';
import type { PayloadKey } from '../payload/payload-store.js';
import { brokerNamesOf } from '../topology/names.js';
import { TRACKING_CONTENT_TYPE, type CreatedReport, type SettledReport, type TrackingRecord } from '../tracking-stream/tracking-report.js';
import { dueRoute, stepJob } from './step-jobs.js';
import type { DueStep } from './workflow-eval.js';
import type { TrackedWorkflow } from './workflow-fold.js';
import type { PlanNode } from './workflow-plan.js';

/** What one advance does to one workflow: the steps it publishes and those it records cancelled. */
export interface Advance {
  workflow: TrackedWorkflow;
  publish: readonly DueStep[];
  cancel: readonly PlanNode[];
}

/**
 * Publishes workflow steps and records them, together, in one AMQP transaction (docs/workflows.md,
 * "What holds"): each step job (to its due queue, see dueRoute), a `created` record for it, a
 * `settled` `cancelled` record for each step that will never run, and a `dead` one for a step that
 * cannot be sent (a type its queue does not allow): all of them take effect at the commit, or none
 * when the process or its connection dies first. So the stream says a step was published exactly
 * when it was, and the next holder of the lock, reading it, never publishes it again.
 *
 * `parent_results` above the queue's payload threshold go to the payload store, and the job
 * carries `meta.parent_results_ref` (`<tenant>/<uuid>`), loaded back before its handler runs (a
 * retry or a re-run after a crash loads them again: they are left to the sweep, after
 * `payloads.retention`); arguments above it travel by reference as every job's do.
 */
export class StepPublisher {
  private channel: Promise<Channel> | undefined;

  constructor(
    private readonly config: CompiledConfig,
    private readonly connection: AmqpConnection,
    private readonly log: Logger,
    private readonly payloads: PayloadOffloader | undefined,
  ) {}

  /**
   * Publishes and records every advance in one transaction.
   * @returns the ids of the jobs published or recorded (known to the caller until it reads them back).
   * @throws when the transaction did not commit (nothing of it took effect, unless the connection
   *   went during the commit: the caller reads the stream again before it tries again).
   */
  async commit(advances: readonly Advance[]): Promise<string[]> {
    const channel = await this.open();
    const records: TrackingRecord[] = [];
    const ids: string[] = [];
    const stored: PayloadKey[] = [];
    try {
      for (const { workflow, publish, cancel } of advances) {
        for (const due of publish) {
          ids.push(due.node.job as string);
          const failure = await this.publishStep(channel, workflow, due, stored);
          records.push(failure ?? created(workflow, due.node));
        }
        for (const node of cancel) {
          ids.push(node.job as string);
          records.push(settled(workflow, node, 'cancelled'));
        }
      }
      if (records.length === 0) return [];
      const names = brokerNamesOf(this.config);
      await publish(channel, names.tracking, '', Buffer.from(JSON.stringify(records)), {
        contentType: TRACKING_CONTENT_TYPE,
        messageId: uuidv7(),
        type: 'tracking.workflow-advance',
        persistent: true,
      });
      await commit(channel);
    } catch (err) {
      // Not committed: the channel may be in any state, and a stored payload is nobody's.
      this.channel = undefined;
      await channel.close().catch(() => undefined);
      for (const key of stored) await this.payloads?.store.delete(key).catch(() => undefined);
      throw err;
    }
    for (const key of stored) await this.payloads?.store.commit(key).catch(() => undefined);
    return ids;
  }

  async close(): Promise<void> {
    const channel = await this.channel?.catch(() => undefined);
    this.channel = undefined;
    await channel?.close().catch(() => undefined);
  }

  /** Publishes one step on the transaction's channel. @returns a `dead` record instead when it cannot be sent. */
  private async publishStep(
    channel: Channel,
    workflow: TrackedWorkflow,
    due: DueStep,
    stored: PayloadKey[],
  ): Promise<SettledReport | undefined> {
    let step;
    try {
      step = stepJob(this.config, workflow, due);
    } catch (err) {
      if (!(err instanceof StagecoachError)) throw err;
      this.log.error('workflow step cannot be sent: it fails', { workflow: workflow.id, step: due.node.path, err: err.message });
      const { type, message } = toJobError(err);
      return settled(workflow, due.node, 'dead', { type, message });
    }
    const { job, headers, traceparent } = step;
    const wire = { tenantHeader: this.config.tenantHeader, traceparent, headers };
    let message = toWire(job, wire);
    const route = dueRoute(this.config, job, message.options.headers ?? {});
    if (
      this.payloads?.exceeds(job.queue, message.content.length) === true &&
      job.parent_results !== undefined &&
      job.parent_results.length > 0
    ) {
      const key: PayloadKey = { tenant: payloadTenant(job.tenant), id: randomUUID() };
      await this.payloads.store.put(key, Buffer.from(JSON.stringify(job.parent_results)));
      stored.push(key);
      delete job.parent_results;
      job.meta.parent_results_ref = formatPayloadRef(key);
      message = toWire(job, wire);
    }
    if (this.payloads?.exceeds(job.queue, message.content.length) === true) {
      // Committed by the offloader once "published": within the transaction, before its commit.
      await this.payloads.send(job, wire, (slim) => publish(channel, route.exchange, route.routingKey, slim.content, slim.options));
    } else {
      await publish(channel, route.exchange, route.routingKey, message.content, message.options);
    }
    return undefined;
  }

  private open(): Promise<Channel> {
    this.channel ??= (async () => {
      const channel = await this.connection.createChannel();
      channel.on('error', (err: Error) => this.log.warn('workflow step channel error', { err: err.message }));
      await selectTx(channel);
      return channel;
    })();
    const opening = this.channel;
    opening.catch(() => {
      if (this.channel === opening) this.channel = undefined;
    });
    return opening;
  }
}

/** A publish on the transaction's channel: nothing to confirm (the commit is the confirm), but its buffer may be full. */
async function publish(channel: Channel, exchange: string, routingKey: string, content: Buffer, options: Options.Publish): Promise<void> {
  if (!channel.publish(exchange, routingKey, content, options)) await once(channel, 'drain');
}

function created(workflow: TrackedWorkflow, node: PlanNode): CreatedReport {
  const spec = node.spec;
  return {
    kind: 'created',
    id: uuidv7(),
    job: node.job as string,
    batch: workflow.id,
    ...(workflow.tenant === undefined ? {} : { tenant: workflow.tenant }),
    queue: spec?.queue ?? '',
    ...(spec === undefined ? {} : { type: spec.type }),
    ...(workflow.parent === undefined ? {} : { parent: workflow.parent }),
    at: new Date().toISOString(),
  };
}

function settled(
  workflow: TrackedWorkflow,
  node: PlanNode,
  outcome: 'cancelled' | 'dead',
  error?: { type: string; message: string },
): SettledReport {
  const spec = node.spec;
  return {
    kind: 'settled',
    id: uuidv7(),
    job: node.job as string,
    batch: workflow.id,
    ...(workflow.tenant === undefined ? {} : { tenant: workflow.tenant }),
    stage: 'workflow',
    queue: spec?.queue ?? '',
    ...(spec === undefined ? {} : { type: spec.type }),
    outcome,
    attempt: 1,
    ...(error === undefined ? {} : { error }),
    at: new Date().toISOString(),
  };
}
