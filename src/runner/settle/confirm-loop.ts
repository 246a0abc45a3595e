import type { SettledReport } from '../../tracking-stream/tracking-report.js';
import type { ConfirmPublisher } from '../../broker/confirm-publisher.js';
import { PublishError } from '../../errors/errors.js';
import type { Logger } from '../../logging/logger.js';
import type { ChannelSupervisor } from '../channels/channel-supervisor.js';
import type { Delivery } from '../channels/delivery.js';
import type { Route, RouteMessage, Settled } from './settlement-route.types.js';

/** What the loop publishes on a publisher: a route's message, and whatever wraps it (a batch report). */
export type Publish = (publisher: ConfirmPublisher) => Promise<void>;

export interface ConfirmLoopOptions {
  publishers: ChannelSupervisor<ConfirmPublisher>;
  log: Logger;
  /** The waits before a route whose refusal policy is `wait` publishes again (SettlementOptions.refusalWaitsMs). */
  refusalWaitsMs: readonly number[];
  /** Acknowledges the delivery (and counts the ack). */
  ack(delivery: Delivery): void;
  /**
   * Wraps a route's publish with the batched job's report, in the same confirm wait.
   * `deadOnRefusal`, asked at a refusal: whether the route now rejects the delivery (its refusal
   * is `reject`, or its waits are spent), so a report already confirmed must be followed by a
   * `dead` one.
   */
  withReport(publish: Publish, report: SettledReport, deadOnRefusal: () => boolean): Publish;
}

const NOTHING: Publish = () => Promise.resolve();

/**
 * Carries a route out: publishes what replaces the delivery, then acknowledges it (at-least-once:
 * never the ack before the replacement is confirmed). A publish lost with the publisher channel
 * is tried again on the healed channel, for as long as the delivery's own channel lives; if that
 * dies too, the delivery is abandoned and the broker redelivers it. A publish the broker refuses
 * is handled as the route says (Refusal): another route, waits, or a reject of the delivery to
 * its queue's dead-letter route. Nothing loops forever, nothing is dropped.
 */
export class ConfirmLoop {
  constructor(private readonly options: ConfirmLoopOptions) {}

  async run(delivery: Delivery, route: Route, report?: SettledReport): Promise<Settled> {
    // Nothing replaces it and nothing is reported: only the ack (a discard, a cancel).
    if (route.message === undefined && report === undefined) {
      this.options.ack(delivery);
      return 'acked';
    }
    const send = route.message === undefined ? NOTHING : sender(route.message, route.prepare);
    const { what, refusal } = route;
    const waits = this.options.refusalWaitsMs;
    let stale: ConfirmPublisher | undefined;
    let refusals = 0;
    // Asked while a publish is refused, before this loop counts it: final once no wait is left.
    const final = (): boolean => refusal.kind === 'reject' || (refusal.kind === 'wait' && refusals >= waits.length);
    const publish = report === undefined ? send : this.options.withReport(send, report, final);
    for (;;) {
      if (delivery.source.closed) return this.abandoned(delivery, what);
      let publisher: ConfirmPublisher;
      try {
        publisher = await this.options.publishers.ready(stale);
      } catch {
        // The connection is gone, or the runner stopped: so is the delivery's channel.
        return this.abandoned(delivery, what);
      }
      // Its channel may have died while the publisher healed: the broker redelivers it now, so a
      // copy published here would run beside it (and the ack could not reach the broker anyway).
      if (delivery.source.closed) return this.abandoned(delivery, what);
      try {
        await publish(publisher);
        this.options.ack(delivery);
        return 'acked';
      } catch (err) {
        if (err instanceof PublishError && err.transient) {
          this.options.log.warn(`${what} not confirmed: the publisher channel was lost; trying again on the healed channel`, {
            queue: delivery.queue,
            job_id: delivery.message.properties.messageId,
            err: err.message,
          });
          stale = publisher;
          continue;
        }
        if (refusal.kind === 'wait' && refusals < waits.length) {
          this.options.log.warn(`${what} copy refused by the broker (its queue unavailable for now); trying again`, {
            queue: delivery.queue,
            job_id: delivery.message.properties.messageId,
            err: (err as Error).message,
          });
          await new Promise((resolve) => setTimeout(resolve, waits[refusals++]));
          continue;
        }
        if (refusal.kind === 'fallback') return this.run(delivery, refusal.route(), report);
        this.options.log.error(`${what} refused by the broker; rejecting the delivery to its queue's dead-letter route`, {
          queue: delivery.queue,
          job_id: delivery.message.properties.messageId,
          err: (err as Error).message,
        });
        delivery.source.reject(delivery.message);
        return 'rejected';
      }
    }
  }

  private abandoned(delivery: Delivery, what: string): Settled {
    // Its channel is gone: the broker redelivers it; settling here would act on a dead tag.
    this.options.log.debug(`${what} abandoned with its channel`, { queue: delivery.queue, job_id: delivery.message.properties.messageId });
    return 'abandoned';
  }
}

function sender(message: RouteMessage, prepare: (() => Promise<void>) | undefined): Publish {
  const publish: Publish = (publisher) => publisher.publish(message.exchange, message.routingKey, message.content, message.options);
  if (prepare === undefined) return publish;
  // Its queue first (a suspect queue declared on first use): published before the queue is there,
  // the job would be confirmed, acked and left in `unroutable` by the delay ladder. A failure is
  // no PublishError: a refusal, waited out (the delivery stays unacked meanwhile).
  return async (publisher) => {
    await prepare();
    await publish(publisher);
  };
}
