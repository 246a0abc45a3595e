import type { Options } from 'amqplib';
import type { AmqpConnection } from './amqp-connection.js';
import { ConfirmPublisher, type PublishChannel, type QueueFullObserver } from './confirm-publisher.js';
import { isOpen } from './connection-state.js';

/**
 * A confirm channel that opens anew, on its connection, when the one it had was closed (a channel
 * error, a message amqplib could not send): a long-lived producer (`Publisher`, the admin server's
 * pushes) is never left with a dead channel while its connection lives. Publishes that were on
 * the lost channel fail as ConfirmPublisher fails them; the next one opens the new channel.
 */
export class ReopeningPublisher implements PublishChannel {
  private opening: Promise<ConfirmPublisher> | undefined;
  private closed = false;

  private constructor(
    private current: ConfirmPublisher,
    private readonly connection: AmqpConnection,
    private readonly onQueueFull?: QueueFullObserver,
  ) {}

  static async open(connection: AmqpConnection, onQueueFull?: QueueFullObserver): Promise<ReopeningPublisher> {
    return new ReopeningPublisher(await ConfirmPublisher.open(connection, undefined, onQueueFull), connection, onQueueFull);
  }

  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Options.Publish,
    lost?: AbortSignal,
    sent?: () => void,
  ): Promise<void> {
    if (this.current.isOpen || this.closed || !isOpen(this.connection)) {
      return this.current.publish(exchange, routingKey, content, options, lost, sent);
    }
    this.opening ??= ConfirmPublisher.open(this.connection, undefined, this.onQueueFull).then(
      (opened) => {
        this.current = opened;
        this.opening = undefined;
        return opened;
      },
      (err: unknown) => {
        this.opening = undefined;
        throw err;
      },
    );
    return this.opening.then(
      (opened) => opened.publish(exchange, routingKey, content, options, lost, sent),
      // Could not open: fails as the lost channel would, transient.
      () => this.current.publish(exchange, routingKey, content, options, lost, sent),
    );
  }

  readyMessages(queue: string): Promise<number | undefined> {
    return this.current.readyMessages(queue);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.opening?.catch(() => undefined);
    await this.current.close();
  }
}
