import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context } from '@opentelemetry/api';
import { OJS_HEADERS } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
import { childTraceparent } from '../job/trace-context.js';

/**
 * Spans through the OpenTelemetry API. Without an SDK registered by the application the API is
 * a no-op and this costs next to nothing; with one (and its W3C propagator), each handler call
 * is a CONSUMER span continuing the job's `x-ojs-traceparent`, and emitted jobs carry the
 * span's context onward.
 */
const tracer = trace.getTracer('stagecoach');

const headerGetter = {
  get: (carrier: Record<string, unknown>, key: string): string | undefined => {
    const value = key === 'traceparent' ? carrier[OJS_HEADERS.traceparent] : carrier[key];
    return typeof value === 'string' ? value : undefined;
  },
  keys: (carrier: Record<string, unknown>): string[] => Object.keys(carrier),
};

/**
 * Whether an SDK is registered: the global provider is a proxy whose delegate stays the no-op
 * provider until an SDK sets one. Checked per job so that an SDK registered late still counts.
 */
export function sdkRegistered(): boolean {
  const provider = trace.getTracerProvider() as { getDelegate?: () => { constructor: { name: string } } };
  const delegate = provider.getDelegate?.();
  return delegate !== undefined && delegate.constructor.name !== 'NoopTracerProvider';
}

/** Runs `fn` inside a span for `job`, whose parent is the trace the job arrived with. */
export function inJobSpan<T>(stage: string, queue: string, job: Job, headers: Record<string, unknown>, fn: () => Promise<T>): Promise<T> {
  // The hot path without an SDK: no context, no span, no attributes object.
  if (!sdkRegistered()) return fn();
  const parent: Context = propagation.extract(ROOT_CONTEXT, headers, headerGetter);
  return tracer.startActiveSpan(
    `${stage} process`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'messaging.system': 'rabbitmq',
        'messaging.operation': 'process',
        'messaging.destination.name': queue,
        'messaging.message.id': job.id,
        'ojs.job.type': job.type,
        'ojs.job.attempt': job.attempt,
        ...(job.tenant === undefined ? {} : { 'ojs.tenant': job.tenant }),
      },
    },
    parent,
    async (span) => {
      try {
        return await fn();
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
        throw err;
      } finally {
        span.end();
      }
    },
  );
}

/**
 * The traceparent of a job emitted now: the active span's when an SDK records one, else the
 * parent's trace continued with a new span id (W3C propagation without an SDK).
 */
export function traceparentForEmit(parent: unknown): string {
  const span = trace.getSpan(context.active());
  if (span?.isRecording()) {
    const carrier: Record<string, string> = {};
    propagation.inject(context.active(), carrier);
    if (carrier.traceparent) return carrier.traceparent;
  }
  return childTraceparent(typeof parent === 'string' ? parent : undefined);
}
