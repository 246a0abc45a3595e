import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { OjsEvent } from '../events/ojs-event.js';
import { uuidv7 } from '../job/uuid-v7.js';
import type { Logger } from '../logging/logger.js';
import { hostOf, isInternalAddress, publicOnlyLookup, RefusedDestinationError } from './webhook-destination.js';
import { webhookSignature } from './webhook-signature.js';
import type { WebhookSubscription } from './webhook-subscription.js';

/** How deliveries are tried (docs/webhooks.md). */
export interface WebhookDeliveryOptions {
  /** Waits before the second, third... attempt, ms (spec/ojs-webhooks.md 7.2): its length is the retries. */
  retryDelaysMs?: readonly number[];
  /** How long one attempt may take, ms (spec 7.3). @defaultValue 30000 */
  timeoutMs?: number;
  /** Deliveries one subscription holds, waiting or retrying; past it the oldest is dropped. @defaultValue 256 */
  maxPending?: number;
  /** How often an admin server that does not deliver asks to, ms (docs/webhooks.md "One server delivers"). @defaultValue 5000 */
  delivererRetryMs?: number;
}

/** A queue's options: the delivery ones, and whether internal addresses may be delivered to now. */
export interface WebhookQueueOptions extends WebhookDeliveryOptions {
  /** Asked before each attempt (`webhooks.allow_private_addresses`, read as the file is now). @defaultValue never */
  allowPrivateAddresses?: () => Promise<boolean>;
}

/** spec/ojs-webhooks.md 7.2: 30 s, 2 min, 10 min, 1 h, 4 h, 12 h, 24 h (8 attempts in all). */
export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = [30e3, 120e3, 600e3, 3600e3, 4 * 3600e3, 12 * 3600e3, 24 * 3600e3];
export const DEFAULT_DELIVERY_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_PENDING = 256;
/** A `Retry-After` is obeyed up to this, ms: an endpoint cannot park a delivery for days. */
const MAX_RETRY_AFTER_MS = 3600e3;

interface Delivery {
  /** Stable across retries (spec 7.5): receivers deduplicate by it. */
  id: string;
  event: OjsEvent;
  attempt: number;
  dueAt: number;
}

type Outcome = { ok: true } | { ok: false; retry: boolean; reason: string; retryAfterMs?: number };

/**
 * One subscription's deliveries: at most `maxPending` held, one attempt in flight at a time, each
 * bounded by the timeout. A slow or dead endpoint therefore holds only its own queue back, never
 * another subscription's. 2xx delivers; 5xx, 429, a timeout or a refused connection is retried
 * after the next delay; any other answer (4xx, a redirect, which is not followed) gives up. The
 * subscription is looked up before every attempt: a deleted or deactivated one sends nothing
 * more, a changed URL or secret applies to the next attempt.
 */
export class WebhookQueue {
  private readonly pending: Delivery[] = [];
  private busy = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private dropped = 0;
  /** Aborts the attempt in flight when the queue closes (its subscription deleted, the server stopping). */
  private readonly stop = new AbortController();
  private readonly delays: readonly number[];
  private readonly timeoutMs: number;
  private readonly maxPending: number;
  private readonly allowPrivate: () => Promise<boolean>;

  constructor(
    private readonly id: string,
    private readonly lookup: (id: string) => WebhookSubscription | undefined,
    private readonly log: Logger,
    options: WebhookQueueOptions = {},
  ) {
    this.allowPrivate = options.allowPrivateAddresses ?? (() => Promise.resolve(false));
    this.delays = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_DELIVERY_TIMEOUT_MS;
    this.maxPending = options.maxPending ?? DEFAULT_MAX_PENDING;
  }

  /** Deliveries held, waiting or retrying (not the one in flight). */
  get size(): number {
    return this.pending.length;
  }

  add(event: OjsEvent): void {
    if (this.closed) return;
    if (this.pending.length >= this.maxPending) {
      this.pending.shift();
      if (this.dropped++ % 100 === 0)
        this.log.warn('webhook deliveries dropped: the endpoint does not keep up', { subscription: this.id, dropped: this.dropped });
    }
    this.pending.push({ id: `del_${uuidv7()}`, event, attempt: 1, dueAt: Date.now() });
    this.pump();
  }

  close(): void {
    this.closed = true;
    this.pending.length = 0;
    clearTimeout(this.timer);
    this.stop.abort();
  }

  private pump(): void {
    if (this.busy || this.closed) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = Date.now();
    const index = this.pending.findIndex((delivery) => delivery.dueAt <= now);
    if (index < 0) {
      if (this.pending.length === 0) return;
      const next = Math.min(...this.pending.map((delivery) => delivery.dueAt));
      this.timer = setTimeout(() => this.pump(), Math.max(0, next - now));
      this.timer.unref();
      return;
    }
    const [delivery] = this.pending.splice(index, 1) as [Delivery];
    this.busy = true;
    void this.attempt(delivery).finally(() => {
      this.busy = false;
      this.pump();
    });
  }

  private async attempt(delivery: Delivery): Promise<void> {
    const subscription = this.lookup(this.id);
    if (subscription === undefined || !subscription.active) return;
    const outcome = await this.post(subscription, delivery);
    if (outcome.ok || this.closed) return;
    const delay = this.delays[delivery.attempt - 1];
    const fields = {
      subscription: this.id,
      delivery: delivery.id,
      event: delivery.event.id,
      attempt: delivery.attempt,
      reason: outcome.reason,
    };
    if (!outcome.retry || delay === undefined) {
      this.log.warn('webhook delivery given up', fields);
      return;
    }
    this.log.info('webhook delivery failed: retried', { ...fields, in_ms: delay });
    delivery.attempt++;
    delivery.dueAt = Date.now() + Math.max(delay, Math.min(outcome.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS));
    if (this.pending.length < this.maxPending) this.pending.push(delivery);
  }

  private async post(subscription: WebhookSubscription, delivery: Delivery): Promise<Outcome> {
    const body = JSON.stringify(delivery.event);
    const timestamp = String(Math.floor(Date.now() / 1000));
    try {
      const url = new URL(subscription.url);
      const allowPrivate = await this.allowPrivate().catch(() => false);
      // A literal address never goes through the lookup: checked here; a name is checked by the lookup.
      const host = hostOf(url);
      if (!allowPrivate && isIP(host) !== 0 && isInternalAddress(host))
        throw new RefusedDestinationError(`${host} is an internal address (set webhooks.allow_private_addresses to deliver there)`);
      const status = await send(url, allowPrivate, AbortSignal.any([AbortSignal.timeout(this.timeoutMs), this.stop.signal]), body, {
        'Content-Type': 'application/json',
        'User-Agent': 'OJS-Webhook/1.0 stagecoach',
        'X-OJS-Event-Type': delivery.event.type,
        'X-OJS-Delivery-ID': delivery.id,
        'X-OJS-Subscription-ID': subscription.id,
        'X-OJS-Timestamp': timestamp,
        'X-OJS-Signature': webhookSignature(subscription.secret, timestamp, body),
      });
      if (status.code >= 200 && status.code < 300) return { ok: true };
      const reason = `HTTP ${status.code}`;
      if (status.code === 429) return { ok: false, retry: true, reason, ...retryAfter(status.retryAfter) };
      return { ok: false, retry: status.code >= 500, reason };
    } catch (err) {
      const error = err as Error;
      if (error instanceof RefusedDestinationError) return { ok: false, retry: false, reason: `refused destination: ${error.message}` };
      return {
        ok: false,
        retry: true,
        reason: error.name === 'TimeoutError' ? `no answer within ${this.timeoutMs} ms` : error.message,
      };
    }
  }
}

/**
 * One POST; its status and `Retry-After`. Redirects are not followed (node:http never does); the
 * answer's body is not read. Unless internal addresses are allowed, the socket connects only to
 * an address publicOnlyLookup checked.
 */
function send(
  url: URL,
  allowPrivate: boolean,
  signal: AbortSignal,
  body: string,
  headers: Record<string, string>,
): Promise<{ code: number; retryAfter: string | null }> {
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request(
      url,
      {
        method: 'POST',
        signal,
        headers: { ...headers, 'Content-Length': String(Buffer.byteLength(body)) },
        agent: false,
        ...(allowPrivate ? {} : { lookup: publicOnlyLookup }),
      },
      (response) => {
        response.resume();
        const header = response.headers['retry-after'];
        resolve({ code: response.statusCode ?? 0, retryAfter: typeof header === 'string' ? header : null });
        response.destroy();
      },
    );
    request.on('error', (err: Error) => reject(signal.aborted && signal.reason instanceof Error ? signal.reason : err));
    request.end(body);
  });
}

function retryAfter(header: string | null): { retryAfterMs?: number } {
  const seconds = header === null ? NaN : Number(header);
  return Number.isFinite(seconds) && seconds >= 0 ? { retryAfterMs: seconds * 1000 } : {};
}
