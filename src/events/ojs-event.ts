import { uuidv7 } from '../job/uuid-v7.js';

/**
 * The OJS events of queue configuration (OJS queue configuration 10.1) and of tenants
 * (docs/broker.md "Events"). `queue.overflow` is listed for consumers and other producers:
 * stagecoach itself does not emit it (RabbitMQ drops the head of a `drop_oldest` queue without
 * telling any client; see docs/broker.md "Events").
 */
export const EVENT_TYPES = [
  'queue.full',
  'queue.overflow',
  'queue.config_updated',
  'queue.deleted',
  'tenant.provisioned',
  'tenant.retired',
  // A batch's every known job settled (docs/batches.md); published by `stagecoach tracker`.
  'batch.completed',
  // Flow limits (OJS rate-limiting extension 11.1; docs/flow-control.md), from stage processes.
  'rate_limit.exceeded',
  'rate_limit.released',
  'rate_limit.dropped',
  'rate_limit.dynamic_adjusted',
  // A job pushed through the HTTP binding into a queue with `events: true` (docs/http-binding.md).
  'job.enqueued',
  // Jobs of the queues with `events: true` (OJS events 4.1; events/job-events.ts), from stage processes.
  'job.completed',
  'job.failed',
  'job.discarded',
  'job.cancelled',
  // An HTTP worker's progress report (spec/ojs-progress.md 11.1; docs/http-binding.md).
  'progress.updated',
  // Workflows (spec/ojs-workflows.md appendix B; docs/workflows.md), from the holder of the workflow lock.
  'workflow.started',
  'workflow.completed',
  'workflow.failed',
  'workflow.cancelled',
  'workflow.callback_fired',
  // Schedules (OJS cron 9; docs/schedules.md), from the scheduler's leader.
  'cron.triggered',
  'cron.skipped',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** The CloudEvents version the envelope follows (OJS events are CloudEvents-shaped). */
export const EVENT_SPEC_VERSION = '1.0';

/** AMQP `content_type` of an event: the structured CloudEvents JSON format, the envelope as the body. */
export const EVENT_CONTENT_TYPE = 'application/cloudevents+json';

/**
 * One event, as it travels (the whole message body). Invariants: `id` is a UUIDv7, so ids sort
 * by creation; `time` is the moment the event was made (RFC 3339, UTC); `type` is also the
 * routing key on `<prefix>.events`.
 */
export interface OjsEvent<D extends Record<string, unknown> = Record<string, unknown>> {
  specversion: typeof EVENT_SPEC_VERSION;
  id: string;
  type: EventType;
  /** Who emitted it: `stagecoach/<command>` (`stagecoach/apply`) or `stagecoach/<stage names>` for a stage process. */
  source: string;
  time: string;
  /** What it is about: the logical queue for `queue.*` events, the tenant for `tenant.*` ones, the job id for `job.*` ones. */
  subject?: string;
  datacontenttype: 'application/json';
  data: D;
}

/** Builds an event envelope; `now` for tests. */
export function createEvent<D extends Record<string, unknown>>(
  type: EventType,
  source: string,
  subject: string | undefined,
  data: D,
  now: number = Date.now(),
): OjsEvent<D> {
  return {
    specversion: EVENT_SPEC_VERSION,
    id: uuidv7(now),
    type,
    source,
    time: new Date(now).toISOString(),
    ...(subject === undefined ? {} : { subject }),
    datacontenttype: 'application/json',
    data,
  };
}
