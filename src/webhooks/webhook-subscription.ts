import { randomBytes } from 'node:crypto';
import { StagecoachError } from '../errors/errors.js';
import { uuidv7 } from '../job/uuid-v7.js';
import { refusedHost } from './webhook-destination.js';

/**
 * A webhook subscription (spec/ojs-webhooks.md 5.1; docs/webhooks.md): where the events of its
 * owner are POSTed, signed with its secret. Kept in the schedules stream (schedule-records.ts),
 * so every admin server knows it and it survives restarts.
 */
export interface WebhookSubscription {
  /** `sub_<UUIDv7>`. */
  id: string;
  /** The tenant whose events it receives; absent: the admin's, every event. */
  owner?: string;
  url: string;
  /** Event types: exact, `prefix.*`, or `*` for every event. */
  events: string[];
  active: boolean;
  /** The HMAC-SHA256 key; never shown after creation. */
  secret: string;
  filter?: WebhookFilter;
  metadata?: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

/** Events must match these as well as a type (spec 5.2). */
export interface WebhookFilter {
  queues?: string[];
  job_types?: string[];
}

/** Subscriptions one tenant (or the admin, for itself) may hold: each is a delivery queue in memory. */
export const WEBHOOKS_PER_OWNER = 32;

const MAX_URL = 2048;
const MAX_EVENTS = 32;
const MAX_FILTER_ITEMS = 32;
const MAX_METADATA_BYTES = 4096;
const MIN_SECRET = 8;
const MAX_SECRET = 256;
const EVENT_PATTERN = /^(\*|[a-z][a-z0-9_]*(\.[a-z0-9_]+)*(\.\*)?)$/;

function invalid(message: string): StagecoachError {
  return new StagecoachError('INVALID_REQUEST', message);
}

/** What a create or update body may set, checked. */
export type WebhookInput = Partial<Pick<WebhookSubscription, 'url' | 'events' | 'active' | 'secret' | 'filter' | 'metadata'>>;

/**
 * Reads a create (`partial` false: `url` and `events` required) or update body. Unknown fields
 * and system-managed ones (`id`, `created_at`) are ignored, as OJS bodies allow. Unless
 * `allowPrivateAddresses`, a `url` whose host is a literal internal address or `localhost` is refused
 * (webhook-destination.ts; names are checked again at every delivery).
 * @throws StagecoachError `INVALID_REQUEST` naming the field.
 */
export function readWebhookInput(body: unknown, partial: boolean, allowPrivateAddresses = false): WebhookInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('the body must be a JSON object');
  const raw = body as Record<string, unknown>;
  const input: WebhookInput = {};
  if (raw.url !== undefined || !partial) input.url = checkUrl(raw.url, allowPrivateAddresses);
  if (raw.events !== undefined || !partial) input.events = checkEvents(raw.events);
  if (raw.active !== undefined) {
    if (typeof raw.active !== 'boolean') throw invalid('"active" must be true or false');
    input.active = raw.active;
  }
  if (raw.secret !== undefined) {
    if (typeof raw.secret !== 'string' || raw.secret.length < MIN_SECRET || raw.secret.length > MAX_SECRET)
      throw invalid(`"secret" must be a string of ${MIN_SECRET} to ${MAX_SECRET} characters`);
    input.secret = raw.secret;
  }
  // `null` clears a filter or metadata (an update's way to remove them).
  if (raw.filter === null) input.filter = {};
  else if (raw.filter !== undefined) input.filter = checkFilter(raw.filter);
  if (raw.metadata === null) input.metadata = {};
  else if (raw.metadata !== undefined) {
    if (typeof raw.metadata !== 'object' || Array.isArray(raw.metadata)) throw invalid('"metadata" must be a JSON object');
    if (Buffer.byteLength(JSON.stringify(raw.metadata)) > MAX_METADATA_BYTES)
      throw invalid(`"metadata" must be at most ${MAX_METADATA_BYTES} bytes of JSON`);
    input.metadata = raw.metadata as Record<string, unknown>;
  }
  return input;
}

/** A new subscription of `owner` from a checked create body; a fresh secret when it names none. */
export function newSubscription(input: WebhookInput, owner: string | undefined): WebhookSubscription {
  const at = new Date().toISOString();
  return {
    id: `sub_${uuidv7()}`,
    ...(owner === undefined ? {} : { owner }),
    url: input.url as string,
    events: input.events as string[],
    active: input.active ?? true,
    secret: input.secret ?? `whsec_${randomBytes(32).toString('hex')}`,
    ...(input.filter === undefined ? {} : { filter: input.filter }),
    ...(input.metadata === undefined ? {} : { metadata: input.metadata }),
    created_at: at,
    updated_at: at,
  };
}

/** The subscription as answers show it: without its secret (spec 6.3), unless `withSecret` (its creation). */
export function webhookView(subscription: WebhookSubscription, withSecret = false): Record<string, unknown> {
  const { secret, owner, ...shown } = subscription;
  return { ...shown, ...(owner === undefined ? {} : { tenant: owner }), ...(withSecret ? { secret } : {}) };
}

function checkUrl(value: unknown, allowPrivateAddresses: boolean): string {
  if (typeof value !== 'string' || value === '') throw invalid('"url" must be an http or https URL');
  if (value.length > MAX_URL) throw invalid(`"url" must be at most ${MAX_URL} characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(`"url" is not a URL: ${JSON.stringify(value.slice(0, 100))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(`"url" must be http or https, not ${url.protocol.slice(0, -1)}`);
  // Shown in every answer about the subscription, and refused by fetch: never in the URL.
  if (url.username !== '' || url.password !== '')
    throw invalid('"url" must not carry a user or password: the signature authenticates deliveries');
  const refused = allowPrivateAddresses ? undefined : refusedHost(url);
  if (refused !== undefined)
    throw invalid(
      `"url" must reach a public address: ${refused} (the operator allows internal ones with webhooks.allow_private_addresses)`,
    );
  return value;
}

function checkEvents(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_EVENTS)
    throw invalid(`"events" must be a list of 1 to ${MAX_EVENTS} event types ("job.completed", "job.*", "*")`);
  for (const type of value) {
    if (typeof type !== 'string' || type.length > 128 || !EVENT_PATTERN.test(type))
      throw invalid(`"events" holds ${JSON.stringify(type)}: an event type is "job.completed", "job.*" or "*"`);
  }
  return [...new Set(value as string[])];
}

function checkFilter(value: unknown): WebhookFilter {
  if (typeof value !== 'object' || Array.isArray(value)) throw invalid('"filter" must be a JSON object');
  const raw = value as Record<string, unknown>;
  const filter: WebhookFilter = {};
  for (const field of ['queues', 'job_types'] as const) {
    const list = raw[field];
    if (list === undefined || list === null) continue;
    if (
      !Array.isArray(list) ||
      list.length > MAX_FILTER_ITEMS ||
      list.some((item) => typeof item !== 'string' || item === '' || item.length > 255)
    )
      throw invalid(`"filter.${field}" must be a list of at most ${MAX_FILTER_ITEMS} names`);
    filter[field] = list as string[];
  }
  return filter;
}
