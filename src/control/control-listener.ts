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
  private healing: NodeJS.Timeout | undefined;

  /**
   * @param onReattached called after the listener came back on its own (its channel closed on a
   * live connection): messages sent meanwhile were missed, so whatever they carry is read again.
   */
  constructor(
    private readonly config: CompiledConfig,
    private readonly log: Logger,
    private readonly onMessage: (message: ControlMessage) => Promise<void>,
    private readonly onReattached: () => Promise<void> = () => Promise.resolve(),
  ) {}

  async attach(connection: AmqpConnection): Promise<void> {
    clearTimeout(this.healing);
    const names = new BrokerNames(this.config.prefix);
    const channel = await connection.createChannel();
    this.channel = channel;
    channel.on('error', (err: Error) => this.log.warn('control channel error', { err: err.message }));
    channel.on('close', () => {
      if (this.channel !== channel) return; // closed on purpose, or replaced
      this.channel = undefined;
      // A lost connection re-attaches everything; a channel lost alone is healed here.
      this.healing = setTimeout(() => void this.heal(connection), 1000);
    });
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
    clearTimeout(this.healing);
    const channel = this.channel;
    this.channel = undefined;
    await channel?.close().catch(() => undefined);
  }

  private async heal(connection: AmqpConnection): Promise<void> {
    if (this.channel !== undefined) return;
    try {
      await this.attach(connection);
      await this.onReattached();
    } catch (err) {
      // The connection is going too: the group re-attaches the listener on the next one.
      this.log.warn('control channel not re-opened', { err: (err as Error).message });
    }
  }
}
