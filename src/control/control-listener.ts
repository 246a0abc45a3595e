import type { Channel } from 'amqplib';
import type { AmqpConnection } from '../broker/amqp-connection.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import { BrokerNames } from '../topology/names.js';
import { parseControlMessage, type ControlMessage } from './control-protocol.js';

/**
 * Every running stage process binds a private, auto-deleted queue to the fanout exchange
 * `<prefix>.control`, so a control message reaches all of them at once, whatever the stage or
 * tenant. Re-attached on every connection. The queue is server-named (`amq.gen-…`), which is
 * what the tenant and internal users' permissions allow (security/permissions.ts).
 */
export class ControlListener {
  private channel: Channel | undefined;

  constructor(
    private readonly config: CompiledConfig,
    private readonly log: Logger,
    private readonly onMessage: (message: ControlMessage) => Promise<void>,
  ) {}

  async attach(connection: AmqpConnection): Promise<void> {
    const names = new BrokerNames(this.config.prefix);
    const channel = await connection.createChannel();
    this.channel = channel;
    channel.on('error', (err: Error) => this.log.warn('control channel error', { err: err.message }));
    // With tenantUsers a stage user may not declare the exchange (provision did); checking needs no permission.
    if (this.config.security.tenantUsers) await channel.checkExchange(names.control);
    else await channel.assertExchange(names.control, 'fanout', { durable: this.config.durable });
    const { queue } = await channel.assertQueue('', { exclusive: true, autoDelete: true, durable: false });
    await channel.bindQueue(queue, names.control, '');
    await channel.consume(
      queue,
      (message) => {
        if (!message) return;
        const control = parseControlMessage(message.content);
        if (!control) {
          this.log.warn('ignored an invalid control message', { body: message.content.toString('utf8').slice(0, 200) });
          return;
        }
        this.log.info('control message', { ...control });
        this.onMessage(control).catch((err: unknown) =>
          this.log.error('control message failed', { ...control, err: (err as Error).message }),
        );
      },
      { noAck: true },
    );
  }

  async close(): Promise<void> {
    await this.channel?.close().catch(() => undefined);
    this.channel = undefined;
  }
}
