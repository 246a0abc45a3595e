import type { AmqpConnection } from '../broker/amqp-connection.js';
import { ExchangeProbe } from '../broker/exchange-probe.js';
import { stateMarker, type QueueState, type QueueStateTarget } from './queue-state.js';

/** Reads queue states from their marker exchanges (see queue-state.ts). Close it when done. */
export class StateProbe {
  private readonly probe: ExchangeProbe;

  constructor(
    connection: AmqpConnection,
    private readonly prefix: string,
  ) {
    this.probe = new ExchangeProbe(connection);
  }

  /** The state of one physical queue: draining (its logical queue's entry is cut), paused, or active. */
  async stateOf(target: QueueStateTarget): Promise<QueueState> {
    if (await this.probe.exists(stateMarker(this.prefix, 'draining', target))) return 'draining';
    return (await this.probe.exists(stateMarker(this.prefix, 'paused', target))) ? 'paused' : 'active';
  }

  close(): Promise<void> {
    return this.probe.close();
  }
}
