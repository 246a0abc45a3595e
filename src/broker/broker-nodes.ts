import type { ChannelModel as AmqpConnection } from 'amqplib';

/**
 * Which node of a cluster (`broker.urls`) each connection went to, so that logs and `/readyz`
 * can say it and a lost connection's next attempt can start at another node.
 */
const nodes = new WeakMap<AmqpConnection, BrokerNode>();

export interface BrokerNode {
  /** Position in `broker.urls`. */
  index: number;
  /** `host:port`: what logs and `/readyz` show (never the credentials). */
  label: string;
}

/** `host:port` of an AMQP URL, the scheme's default port when it names none. */
export function nodeLabel(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || (parsed.protocol === 'amqps:' ? '5671' : '5672')}`;
  } catch {
    return '(invalid URL)';
  }
}

export function rememberNode(connection: AmqpConnection, node: BrokerNode): void {
  nodes.set(connection, node);
}

/** The node `connection` is connected to; undefined for a connection not opened by `openConnection`. */
export function nodeOf(connection: AmqpConnection): BrokerNode | undefined {
  return nodes.get(connection);
}

/**
 * The order to try the nodes in, starting at `first` and wrapping around: every node once per
 * attempt, so that one node down costs a refused connection, not a backoff delay.
 */
export function nodeOrder(count: number, first: number): number[] {
  const start = ((first % count) + count) % count;
  return Array.from({ length: count }, (_, offset) => (start + offset) % count);
}
