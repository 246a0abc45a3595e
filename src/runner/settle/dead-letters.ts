import type { Message } from 'amqplib';
import { OJS_HEADERS, toWire, withoutBrokerHeaders, type WireMessage } from '../../job/amqp-mapping.js';
import type { HeaderValue, Job, JobError } from '../../job/job.types.js';
import { boundedError, boundedMeta, fittedHeaders } from './dead-letter-bounds.js';

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
 * never expires. What it copies is bounded (dead-letter-bounds.ts), so that it can always be
 * published with its reason; a job that cannot be encoded again at all goes byte for byte, its
 * reason INVALID_PAYLOAD.
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
  const headers = { ...fittedHeaders(withoutBrokerHeaders(message.properties.headers)), ...originHeaders(origin) };
  const reason = boundedError(error);
  if (job) {
    try {
      return jobDeadLetter(job, reason, stage, tenantHeader, headers, now);
    } catch (err) {
      // Not encodable again (a body a producer built beyond what JSON.stringify can take): the
      // bytes as they came, and why.
      const cause = boundedError({
        type: 'INVALID_PAYLOAD',
        message: `the job could not be encoded again (${(err as Error).message}); it failed with ${reason.type}: ${reason.message}`,
      });
      return bodyDeadLetter(message, cause, stage, headers, now);
    }
  }
  return bodyDeadLetter(message, reason, stage, headers, now);
}

/** A dead job as an envelope: its error and meta bounded, its error headers from them. */
export function jobDeadLetter(
  job: Job,
  error: JobError,
  stage: string,
  tenantHeader: string,
  headers: Record<string, HeaderValue>,
  now: string,
): WireMessage {
  const dead: Job = { ...job, error, meta: { ...boundedMeta(job.meta), dead_lettered_at: now, stage } };
  const traceparent = headers[OJS_HEADERS.traceparent];
  const wire = toWire(dead, { tenantHeader, headers, ...(typeof traceparent === 'string' ? { traceparent } : {}) });
  // `enqueue_ttl` bounds the wait in the job's queue; a dead letter that expired in its
  // dead-letter queue (which has no dead-letter route of its own) would be lost.
  delete wire.options.expiration;
  return wire;
}

function bodyDeadLetter(message: Message, error: JobError, stage: string, headers: Record<string, HeaderValue>, now: string): WireMessage {
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
