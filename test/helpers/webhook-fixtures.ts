import type { OjsEvent } from '../../src/events/ojs-event.js';
import type { WebhookSubscription } from '../../src/webhooks/webhook-subscription.js';

/** A `job.completed` event numbered `n` (id `evt-n`, subject `job-n`). */
export function webhookEvent(n: number): OjsEvent {
  return {
    specversion: '1.0',
    id: `evt-${n}`,
    type: 'job.completed',
    source: 'test',
    time: new Date().toISOString(),
    subject: `job-${n}`,
    data: {},
  } as OjsEvent;
}

/** An active subscription to every event, delivered to `url`. */
export function webhookSubscription(id: string, url: string): WebhookSubscription {
  const at = new Date().toISOString();
  return { id, url, events: ['*'], active: true, secret: 'a-test-secret', created_at: at, updated_at: at };
}
