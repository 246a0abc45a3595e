import type { Message } from 'amqplib';
import { OJS_HEADERS, toWire, withoutBrokerHeaders, type WireMessage } from '../job/amqp-mapping.js';
import type { Job, JobError } from '../job/job.types.js';

/**
 * Where a dead letter physically came from: the instance's main queue, its tenant and variant.
 * Every stagecoach action on dead letters routes by this, never by the tenant the job claims: a
 * job that says tenant B but was found in A's queue stays A's.
 */
export interface DeadLetterOrigin {
  queue: string;
  tenant: string | undefined;
  variant: string | undefined;
}

export function originHeaders(origin: DeadLetterOrigin): Record<string, string> {
  const headers: Record<string, string> = { [OJS_HEADERS.originQueue]: origin.queue };
  if (origin.tenant !== undefined) headers[OJS_HEADERS.originTenant] = origin.tenant;
  if (origin.variant !== undefined) headers[OJS_HEADERS.originVariant] = origin.variant;
  return headers;
}

/**
 * The dead letter of a delivery a stage gives up on, ready to publish to its dead-letter queue.
 *
 * A job keeps its envelope and gains `error`, `meta.dead_lettered_at` and `meta.stage`; its
 * headers gain `x-ojs-error-type`, `x-ojs-error-message` and the origin (`x-ojs-origin-*`). A message that is not a job keeps
 * its body byte for byte; the reason travels in headers. The broker's own headers (`x-death`
 * from the delay ladder and the like) are dropped: the reason is the stage's. A dead letter
 * never expires.
 */
export function deadLetterMessage(
  message: Message,
  job: Job | undefined,
  error: JobError,
  stage: string,
  tenantHeader: string,
  origin: DeadLetterOrigin,
): WireMessage {
  const now = new Date().toISOString();
  const headers = { ...withoutBrokerHeaders(message.properties.headers), ...originHeaders(origin) };
  if (job) {
    const dead: Job = { ...job, error, meta: { ...job.meta, dead_lettered_at: now, stage } };
    const traceparent = headers[OJS_HEADERS.traceparent];
    const wire = toWire(dead, { tenantHeader, headers, ...(typeof traceparent === 'string' ? { traceparent } : {}) });
    // `enqueue_ttl` bounds the wait in the job's queue; a dead letter that expired in its
    // dead-letter queue (which has no dead-letter route of its own) would be lost.
    delete wire.options.expiration;
    return wire;
  }
  const properties = message.properties;
  return {
    content: message.content,
    options: {
      persistent: true,
      ...(properties.messageId === undefined ? {} : { messageId: properties.messageId as string }),
      ...(properties.contentType === undefined ? {} : { contentType: properties.contentType as string }),
      ...(properties.type === undefined ? {} : { type: properties.type as string }),
      headers: {
        ...headers,
        [OJS_HEADERS.errorType]: error.type,
        [OJS_HEADERS.errorMessage]: error.message,
        'x-ojs-stage': stage,
        'x-ojs-dead-lettered-at': now,
      },
    },
  };
}
