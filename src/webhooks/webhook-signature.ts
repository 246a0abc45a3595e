import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The `X-OJS-Signature` of a delivery (spec/ojs-webhooks.md 8.1): `sha256=` and the hex
 * HMAC-SHA256, under the subscription's secret, of `<timestamp>.<body>`, the timestamp being
 * `X-OJS-Timestamp` (Unix seconds). Signing the timestamp lets a receiver refuse replays.
 */
export function webhookSignature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** Whether `signature` is the one `secret` gives (constant time): what a receiver checks (spec 8.2). */
export function verifyWebhookSignature(secret: string, timestamp: string, body: string, signature: string): boolean {
  const expected = Buffer.from(webhookSignature(secret, timestamp, body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
