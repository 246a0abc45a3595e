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
  /**
   * Set on a queue's entry (the binding through which new jobs reach it): the marker exchange
   * whose existence means the queue is draining, when this binding must stay absent. Declaring
   * skips it then (src/broker/declare-topology.ts), so no start, heal or `provision` undoes a drain.
   */
  drainMarker?: string;
}

export interface Topology {
  exchanges: ExchangeSpec[];
  queues: QueueSpec[];
  bindings: BindingSpec[];
}

/**
 * A RabbitMQ policy stagecoach owns: the queue settings the broker enforces and that must change
 * in place (see queue-policies.ts). RabbitMQ applies one policy per queue, the one of highest
 * priority among those whose pattern matches its name.
 */
export interface PolicySpec {
  name: string;
  /** A regular expression over queue names, anchored at both ends. */
  pattern: string;
  applyTo: 'queues';
  priority: number;
  /** Policy keys (`max-length`, `overflow`, `message-ttl`...); never empty. */
  definition: Record<string, string | number>;
}

/** What the topology needs to know of a stage: the queue it reads and the queues it writes. */
export interface StageEndpoints {
  readonly name: string;
  readonly input: string;
  readonly outputs: readonly string[];
}
