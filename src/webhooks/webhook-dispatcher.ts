import { eventMatches, eventTenant } from '../events/event-filter.js';
import type { OjsEvent } from '../events/ojs-event.js';
import type { Logger } from '../logging/logger.js';
import { WebhookQueue, type WebhookQueueOptions } from './webhook-queue.js';
import type { WebhookSubscription } from './webhook-subscription.js';

/** Where the subscriptions are known, as they change (the schedules stream's book). */
export interface WebhookBook {
  readonly webhooks: ReadonlyMap<string, WebhookSubscription>;
  /** Told of each change (`webhooks`: a subscription created, changed or deleted); returns the way to stop. */
  onChange(listener: (change: string) => void): () => void;
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
 * listened is not delivered. Of the admin servers of a prefix, only the one elected to deliver
 * (webhook-deliverer.ts: `deliver(true)` while it holds `<prefix>.webhook-deliverer`) delivers,
 * so an event reaches a subscription once however many servers run.
 */
export class WebhookDispatcher {
  private readonly queues = new Map<string, WebhookQueue>();
  private book: WebhookBook | undefined;
  private unfollow: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private delivering = false;

  constructor(
    private readonly listen: () => Promise<void>,
    private readonly log: Logger,
    private readonly options: WebhookQueueOptions = {},
  ) {}

  /** The book to read subscriptions from (each new one as the schedules stream is read anew). */
  follow(book: WebhookBook): void {
    this.unfollow?.();
    this.book = book;
    // A subscription created through another server: the deliverer listens for events at once.
    this.unfollow = book.onChange((change) => {
      if (change === 'webhooks') this.tick();
    });
    this.tick();
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  /** Whether this server delivers (it holds the deliverer's election); off, its queues are dropped. */
  deliver(on: boolean): void {
    this.delivering = on;
    if (on) this.tick();
    else this.dropQueues();
  }

  /** A subscription was created or activated: the deliverer reads events from now on. */
  wake(): Promise<void> {
    if (!this.delivering) return Promise.resolve();
    return this.listen().catch((err: unknown) => {
      this.log.warn('webhooks: events not read (tried again)', { err: (err as Error).message });
    });
  }

  offer(event: OjsEvent): void {
    const book = this.book;
    if (!this.delivering || book === undefined || book.webhooks.size === 0) return;
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
    this.delivering = false;
    this.unfollow?.();
    this.dropQueues();
  }

  private dropQueues(): void {
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
    if (this.delivering && [...(subscriptions?.values() ?? [])].some((subscription) => subscription.active)) {
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
