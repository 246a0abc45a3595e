import type { AmqpConnection } from '../broker/amqp-connection.js';
import { BrokerFlags } from '../flags/broker-flags.js';
import { stateFlag, type QueueState, type QueueStateTarget } from './queue-state.js';

/** Reads queue states from their broker flags (see queue-state.ts). Close it when done. */
export class StateProbe {
  private readonly flags: BrokerFlags;

  constructor(connection: AmqpConnection, prefix: string) {
    this.flags = new BrokerFlags(connection, { prefix });
  }

  /** The state of one physical queue: draining (its logical queue's entry is cut), paused, or active. */
  async stateOf(target: QueueStateTarget): Promise<QueueState> {
    if (await this.flags.isSet(stateFlag('draining', target))) return 'draining';
    return (await this.flags.isSet(stateFlag('paused', target))) ? 'paused' : 'active';
  }

  close(): Promise<void> {
    return this.flags.close();
  }
}
