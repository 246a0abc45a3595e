import type { CompiledConfig } from '../../config/config.types.js';
import type { Logger } from '../../logging/logger.js';
import { Leadership, type LeaderRole } from '../../schedule/leadership.js';
import type { WebhookDispatcher } from '../../webhooks/webhook-dispatcher.js';

/** The deliverer's election, `<prefix>.webhook-deliverer`. */
const DELIVERER_ROLE: LeaderRole = {
  flag: { kind: 'webhook-deliverer' },
  what: 'webhooks',
  connectionName: 'stagecoach-webhook-deliverer',
};

/**
 * Elects the one admin server of a prefix that delivers webhooks (docs/webhooks.md, "One server
 * delivers"): every server reads the events, but only the one whose connection holds the exclusive
 * queue `<prefix>.webhook-deliverer` hands them to the subscriptions. When that server stops or
 * loses the broker, the queue goes with its connection and another server takes over within
 * `retryMs` (deliveries the former one still held for a retry are lost with it, as at a restart).
 * An election of its own, not the scheduler's: the scheduler may lead from a `stagecoach scheduler`
 * process, or not run in the admin servers at all.
 */
export function webhookDeliverer(config: CompiledConfig, log: Logger, dispatcher: WebhookDispatcher, retryMs?: number): Leadership {
  return new Leadership(
    config,
    log,
    async (_connection, lost) => {
      dispatcher.deliver(true);
      try {
        await lost;
      } finally {
        dispatcher.deliver(false);
      }
    },
    retryMs,
    DELIVERER_ROLE,
  );
}
