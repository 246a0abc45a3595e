import type { Options } from 'amqplib';
import type { ConfirmPublisher, PublishChannel } from '../../broker/confirm-publisher.js';
import { PublishError } from '../../errors/errors.js';
import type { ChannelSupervisor } from './channel-supervisor.js';

/**
 * A publish channel over a supervised publisher: each publish goes on whatever publisher channel
 * is open now, waiting while it heals; a publisher that cannot heal fails the publish as
 * retryable.
 */
export function healingPublisher(publishers: ChannelSupervisor<ConfirmPublisher>): PublishChannel {
  return {
    publish: (
      exchange: string,
      routingKey: string,
      content: Buffer,
      options: Options.Publish,
      lost?: AbortSignal,
      sent?: () => void,
    ): Promise<void> => {
      const publisher = publishers.current;
      if (publisher !== undefined) return publisher.publish(exchange, routingKey, content, options, lost, sent);
      return publishers.ready().then(
        (healed) =>
          lost?.aborted === true
            ? Promise.reject(lost.reason as Error)
            : healed.publish(exchange, routingKey, content, options, lost, sent),
        (err: Error) => Promise.reject(new PublishError(`cannot publish to "${exchange}": ${err.message}`, exchange, routingKey, true)),
      );
    },
    readyMessages: (queue: string): Promise<number | undefined> => publishers.current?.readyMessages(queue) ?? Promise.resolve(undefined),
  };
}
