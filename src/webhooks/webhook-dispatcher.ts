import { eventMatches, eventTenant } from '../events/event-filter.js';
import type { OjsEvent } from '../events/ojs-event.js';
import type { Logger } from '../logging/logger.js';
import { WebhookQueue, type WebhookQueueOptions } from './webhook-queue.js';
import type { WebhookSubscription } from './webhook-subscription.js';

/** Where the subscriptions are known, as they change (the schedules stream's book). */
export interface WebhookBook {
  readonly webhooks: ReadonlyMap<string, WebhookSubscription>;
}

/** How often the dispatcher makes sure it hears events while subscriptions exist, and forgets deleted ones. */
const TICK_MS = 5000;

/**
 * Delivers the events an admin server reads (EventLog, `<prefix>.events`) to the webhook
 * subscriptions it knows (the schedules stream's book): each event that matches an active
 * subscription's types and filter, and, for a tenant's subscription, is about that tenant (spec
 * 9.3: a tenant never hears another's events; the admin's own subscriptions hear every tenant's),
 * goes into that subscription's own bounded queue (WebhookQueue).
 *
 * Events are at most once (docs/broker.md "Events"): what was published while no admin server
 * listened is not delivered. Every admin server of a prefix delivers what it reads.
 */
export class WebhookDispatcher {
  private readonly queues = new Map<string, WebhookQueue>();
  private book: WebhookBook | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly listen: () => Promise<void>,
    private readonly log: Logger,
    private readonly options: WebhookQueueOptions = {},
  ) {}

  /** The book to read subscriptions from (each new one as the schedules stream is read anew). */
  follow(book: WebhookBook): void {
    this.book = book;
    this.tick();
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  /** A subscription was created or activated: events are read from now on. */
  wake(): Promise<void> {
    return this.listen().catch((err: unknown) => {
      this.log.warn('webhooks: events not read (tried again)', { err: (err as Error).message });
    });
  }

  offer(event: OjsEvent): void {
    const book = this.book;
    if (book === undefined || book.webhooks.size === 0) return;
    const tenant = eventTenant(event);
    for (const subscription of book.webhooks.values()) {
      if (!subscription.active || !wants(subscription, event, tenant)) continue;
      let queue = this.queues.get(subscription.id);
      if (queue === undefined) {
        queue = new WebhookQueue(subscription.id, (id) => this.book?.webhooks.get(id), this.log, this.options);
        this.queues.set(subscription.id, queue);
      }
      queue.add(event);
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const queue of this.queues.values()) queue.close();
    this.queues.clear();
  }

  /** Drops the queues of deleted or deactivated subscriptions; listens while any is active. */
  private tick(): void {
    const subscriptions = this.book?.webhooks;
    for (const [id, queue] of this.queues) {
      const subscription = subscriptions?.get(id);
      if (subscription === undefined || !subscription.active) {
        queue.close();
        this.queues.delete(id);
      }
    }
    if ([...(subscriptions?.values() ?? [])].some((subscription) => subscription.active)) {
      this.listen().catch((err: unknown) => this.log.warn('webhooks: events not read (tried again)', { err: (err as Error).message }));
    }
  }
}

function wants(subscription: WebhookSubscription, event: OjsEvent, tenant: string | undefined): boolean {
  if (subscription.owner !== undefined && tenant !== subscription.owner) return false;
  const filter = subscription.filter;
  return eventMatches(event, {
    types: subscription.events,
    ...(filter?.queues === undefined ? {} : { queues: filter.queues }),
    ...(filter?.job_types === undefined ? {} : { jobTypes: filter.job_types }),
  });
}
