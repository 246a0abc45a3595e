import { ApiError } from '../api-error.js';
import { readJsonValue, MAX_BODY_BYTES } from '../request-body.js';
import type { ApiRequest, ApiResponse } from '../router.js';
import { scheduleRecord } from '../../schedule/schedule-records.js';
import {
  newSubscription,
  readWebhookInput,
  webhookView,
  WEBHOOKS_PER_OWNER,
  type WebhookSubscription,
} from '../../webhooks/webhook-subscription.js';
import type { BindingContext } from './binding-context.js';
import { tenantOf } from './request-tenant.js';

/**
 * The webhook subscription endpoints (spec/ojs-webhooks.md 6, 10; docs/webhooks.md). The
 * subscriptions live in the schedules stream beside the schedules, so every admin server knows
 * them and they survive restarts; the servers deliver the events they read (WebhookDispatcher).
 *
 * A tenant's token creates, sees and changes its own tenant's subscriptions only, which hear that
 * tenant's events only; another tenant's is 404 to it. The admin sees every subscription (or one
 * tenant's with `X-OJS-Tenant`, and creates one for that tenant so); its own hear every event.
 */

/**
 * Changes one at a time in this server: a count checked against the bound, or a subscription read
 * to be changed, is still true when the change is appended (an update never revives a deletion).
 */
const CHANGES = 'webhook-subscriptions';

/** `POST /ojs/v1/webhooks/subscriptions`: 201 `{ subscription }`, the secret shown this once. */
export async function createWebhook(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const owner = tenantOf(request);
  const input = readWebhookInput(await readJsonValue(request.req, MAX_BODY_BYTES, 'INVALID_REQUEST'), false, await privateAllowed(ctx));
  return ctx.pushing.serialize(CHANGES, async () => {
    const held = [...(await ctx.admin.schedules.book()).webhooks.values()].filter((known) => known.owner === owner).length;
    if (held >= WEBHOOKS_PER_OWNER) {
      throw new ApiError(
        429,
        'TENANT_LIMIT_EXCEEDED',
        `${owner === undefined ? 'the admin holds' : `tenant "${owner}" holds`} ${WEBHOOKS_PER_OWNER} webhook subscriptions, the most it may: delete one first`,
      );
    }
    const subscription = newSubscription(input, owner);
    await ctx.admin.schedules.append(scheduleRecord({ kind: 'webhook', subscription }));
    if (subscription.active) await ctx.webhooks.wake();
    return { status: 201, body: { subscription: webhookView(subscription, true) } };
  });
}

/** `GET /ojs/v1/webhooks/subscriptions`: `{ subscriptions, count }`, oldest first. */
export async function listWebhooks(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const owner = tenantOf(request);
  const subscriptions = [...(await ctx.admin.schedules.book()).webhooks.values()]
    .filter((subscription) => owner === undefined || subscription.owner === owner)
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((subscription) => webhookView(subscription));
  return { status: 200, body: { subscriptions, count: subscriptions.length } };
}

/** `GET /ojs/v1/webhooks/subscriptions/{id}`: `{ subscription }`, without its secret. */
export async function getWebhook(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  return { status: 200, body: { subscription: webhookView(await subscriptionOf(ctx, request)) } };
}

/** `PATCH /ojs/v1/webhooks/subscriptions/{id}`: changes the fields given (`url`, `events`, `active`, `filter`, `metadata`, `secret`). */
export async function updateWebhook(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  const input = readWebhookInput(await readJsonValue(request.req, MAX_BODY_BYTES, 'INVALID_REQUEST'), true, await privateAllowed(ctx));
  return ctx.pushing.serialize(CHANGES, async () => {
    const known = await subscriptionOf(ctx, request);
    const subscription: WebhookSubscription = { ...known, ...input, updated_at: new Date().toISOString() };
    await ctx.admin.schedules.append(scheduleRecord({ kind: 'webhook', subscription }));
    if (subscription.active) await ctx.webhooks.wake();
    return { status: 200, body: { subscription: webhookView(subscription) } };
  });
}

/** `DELETE /ojs/v1/webhooks/subscriptions/{id}`: `{ subscription, deleted: true }`; its pending deliveries are dropped. */
export function deleteWebhook(ctx: BindingContext, request: ApiRequest): Promise<ApiResponse> {
  return ctx.pushing.serialize(CHANGES, async () => {
    const subscription = await subscriptionOf(ctx, request);
    await ctx.admin.schedules.append(scheduleRecord({ kind: 'unhook', subscription: subscription.id }));
    return { status: 200, body: { subscription: webhookView(subscription), deleted: true } };
  });
}

/** The caller's subscription of the path's id, or 404 (another tenant's is not found either). */
async function subscriptionOf(ctx: BindingContext, request: ApiRequest): Promise<WebhookSubscription> {
  const id = request.params.id as string;
  const owner = tenantOf(request);
  const subscription = (await ctx.admin.schedules.book()).webhooks.get(id);
  if (subscription === undefined || (owner !== undefined && subscription.owner !== owner))
    throw new ApiError(404, 'NOT_FOUND', `no webhook subscription "${id}"${owner === undefined ? '' : ` of tenant "${owner}"`}`);
  return subscription;
}

/** `webhooks.allow_private_addresses` of the configuration file as it is now. */
async function privateAllowed(ctx: BindingContext): Promise<boolean> {
  return (await ctx.admin.configFile.load()).webhooks.allowPrivateAddresses;
}
