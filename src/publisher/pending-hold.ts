import { routeFor } from '../broker/job-router.js';
import type { PublishChannel } from '../broker/confirm-publisher.js';
import type { CompiledConfig } from '../config/config.types.js';
import { OJS_HEADERS, PENDING_PARK, toWire, type WireOptions } from '../job/amqp-mapping.js';
import type { Job } from '../job/job.types.js';
import { brokerNamesOf, parkKey } from '../topology/names.js';

/**
 * Holds a job pushed `pending` (OJS): it is published to the park exchange (routing key its
 * tenant, `x-ojs-parked-by: pending`) and waits in the parked queue, durable, across restarts of
 * every process, until ACTIVATE sends it on to its queue (http-api/http-binding/pending-jobs.ts).
 * It is refused first as its queue would refuse it (a job type not allowed, no tenant for a
 * tenant-scoped queue), so that an activation never meets what the push could have said. Its
 * `enqueue_ttl` counts in its queue, from activation, not while it is held.
 */
export function holdPending(
  config: CompiledConfig,
  publisher: PublishChannel,
  job: Job,
  wire: Omit<WireOptions, 'tenantHeader'>,
): Promise<void> {
  try {
    routeFor(config, job);
    const message = toWire(job, { ...wire, tenantHeader: config.tenantHeader });
    delete message.options.expiration;
    message.options.headers = { ...message.options.headers, [OJS_HEADERS.parkedBy]: PENDING_PARK };
    return publisher.publish(brokerNamesOf(config).park, parkKey(job.tenant), message.content, message.options);
  } catch (err) {
    return Promise.reject(err as Error);
  }
}
