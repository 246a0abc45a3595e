/** The part of rascal's API stagecoach uses (rascal ships no types). */
declare module 'rascal' {
  import { EventEmitter } from 'node:events';

  export class BrokerAsPromised extends EventEmitter {
    static create(config: object): Promise<BrokerAsPromised>;
    shutdown(): Promise<void>;
    nuke(): Promise<void>;
  }

  const rascal: { BrokerAsPromised: typeof BrokerAsPromised };
  export default rascal;
}
