/** What stagecoach declares on the broker: plain data, built by a pure function. */

export interface ExchangeSpec {
  name: string;
  type: 'direct' | 'fanout' | 'headers' | 'topic';
  durable: boolean;
  /** Where the broker sends what this exchange cannot route. */
  alternateExchange?: string;
}

export interface QueueSpec {
  name: string;
  durable: boolean;
  arguments: Record<string, string | number>;
}

export interface BindingSpec {
  source: string;
  destination: string;
  destinationType: 'queue' | 'exchange';
  routingKey: string;
  /** Binding arguments: the header match of a headers exchange. */
  arguments?: Record<string, string>;
}

export interface Topology {
  exchanges: ExchangeSpec[];
  queues: QueueSpec[];
  bindings: BindingSpec[];
}

/** What the topology needs to know of a stage: the queue it reads and the queues it writes. */
export interface StageEndpoints {
  readonly name: string;
  readonly input: string;
  readonly outputs: readonly string[];
}
