import type { ConsumeMessage } from 'amqplib';
import type { ConfirmPublisher } from '../broker/confirm-publisher.js';
import { toWire, OJS_HEADERS } from '../job/amqp-mapping.js';
import type { HeaderValue, Job, JobError } from '../job/job.types.js';

/** The OJS structured error of anything a handler threw. */
export function toJobError(err: unknown): JobError {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const type = (err as { type?: unknown }).type;
    return {
      type: typeof type === 'string' ? type : typeof code === 'string' && code !== 'HANDLER_ERROR' ? code : err.name,
      message: err.message,
      backtrace: (err.stack ?? '')
        .split('\n')
        .slice(1)
        .map((line) => line.trim())
        .filter(Boolean),
    };
  }
  return { type: 'Error', message: String(err) };
}

export interface DeadLetterTarget {
  exchange: string;
  /** The dead-letter queue's name: the dead-letter exchange routes on it. */
  routingKey: string;
  tenantHeader: string;
}

/**
 * Publishes what a stage gives up on to its dead-letter queue, with the reason, and resolves
 * once the broker confirmed it: only then may the delivery be acknowledged.
 *
 * A job keeps its envelope and gains `error`, `meta.dead_lettered_at` and `meta.stage`. A
 * message that is not a job keeps its body byte for byte; the reason travels in headers.
 */
export class DeadLetters {
  constructor(
    private readonly publisher: ConfirmPublisher,
    private readonly target: DeadLetterTarget,
    private readonly stage: string,
  ) {}

  async send(message: ConsumeMessage, job: Job | undefined, error: JobError): Promise<void> {
    const now = new Date().toISOString();
    const original = (message.properties.headers ?? {}) as Record<string, HeaderValue>;
    if (job) {
      const dead: Job = { ...job, error, meta: { ...job.meta, dead_lettered_at: now, stage: this.stage } };
      const traceparent = original[OJS_HEADERS.traceparent];
      const wire = toWire(dead, {
        tenantHeader: this.target.tenantHeader,
        headers: original,
        ...(typeof traceparent === 'string' ? { traceparent } : {}),
      });
      await this.publisher.publish(this.target.exchange, this.target.routingKey, wire.content, wire.options);
      return;
    }
    const properties = message.properties;
    await this.publisher.publish(this.target.exchange, this.target.routingKey, message.content, {
      persistent: true,
      ...(properties.messageId === undefined ? {} : { messageId: properties.messageId as string }),
      ...(properties.contentType === undefined ? {} : { contentType: properties.contentType as string }),
      ...(properties.type === undefined ? {} : { type: properties.type as string }),
      headers: {
        ...original,
        [OJS_HEADERS.errorType]: error.type,
        [OJS_HEADERS.errorMessage]: error.message,
        'x-ojs-stage': this.stage,
        'x-ojs-dead-lettered-at': now,
      },
    });
  }
}
