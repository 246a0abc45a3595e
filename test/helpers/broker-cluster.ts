import { randomBytes } from 'node:crypto';
import { BrokerNode, brokerNodeUnsupported, type BrokerNodeOptions } from './broker-node.js';

export interface BrokerClusterOptions {
  /** Nodes in the cluster. @defaultValue 3 */
  size?: number;
  /** Node names are `<name>-<n>@localhost` (n from 1). @defaultValue `stagecoach-cluster-<random>` */
  name?: string;
  /** AMQP ports of the nodes, in order; default free ports. */
  amqpPorts?: number[];
  /** Directories of the nodes, in order; default fresh ones in the temp dir. */
  dirs?: string[];
  /** Plugins every node runs (`rabbitmq_management` gets a free port per node). @defaultValue none */
  plugins?: string[];
  /** The nodes outlive this process (scripts/cluster.sh `up`). @defaultValue false */
  keep?: boolean;
  /** Told what happens, for long start-ups. */
  progress?: (line: string) => void;
}

/**
 * A RabbitMQ cluster of private nodes on this machine (test/helpers/broker-node.ts, one Erlang
 * VM per node with its own name, ports and directory; they share the rabbitmq user's Erlang
 * cookie, which is what lets them cluster): the first node boots, the others boot and join it
 * with `rabbitmqctl join_cluster`, one at a time (joins racing each other can fail on mnesia
 * locks). Used by the cluster integration test and by `scripts/cluster.sh`.
 *
 * ```ts
 * const cluster = await BrokerCluster.start();       // 3 nodes, clustered and answering AMQP
 * await cluster.nodes[0].halt(); await cluster.nodes[0].boot();
 * await cluster.remove();                             // every node halted, every directory gone
 * ```
 *
 * Nodes are also killed and their directories deleted when the test process exits without
 * `remove()` (unless `keep`).
 */
export class BrokerCluster {
  private constructor(readonly nodes: BrokerNode[]) {}

  /** Every node's AMQP URL, in node order: `broker.urls` of a configuration. */
  get urls(): string[] {
    return this.nodes.map((node) => node.url);
  }

  static async start(options: BrokerClusterOptions = {}): Promise<BrokerCluster> {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) throw new Error(`cannot start a RabbitMQ cluster: ${unsupported}`);
    const size = options.size ?? 3;
    const name = options.name ?? `stagecoach-cluster-${randomBytes(3).toString('hex')}`;
    const progress = options.progress ?? (() => undefined);
    const nodeOptions = (index: number): BrokerNodeOptions => ({
      name: `${name}-${index + 1}`,
      ...(options.amqpPorts?.[index] === undefined ? {} : { amqpPort: options.amqpPorts[index] }),
      ...(options.dirs?.[index] === undefined ? {} : { dir: options.dirs[index] }),
      plugins: options.plugins ?? [],
      keep: options.keep ?? false,
      // A cluster of one machine's nodes: lose a node, keep the others (the default, spelled out).
      config: { cluster_partition_handling: 'ignore' },
      startTimeoutMs: 90_000,
    });
    const nodes: BrokerNode[] = [];
    const cluster = new BrokerCluster(nodes);
    try {
      // Booting in parallel halves the start-up; joining stays sequential.
      const booted = await Promise.allSettled(Array.from({ length: size }, (_, index) => BrokerNode.start(nodeOptions(index))));
      for (const result of booted) if (result.status === 'fulfilled') nodes.push(result.value);
      const failed = booted.find((result): result is PromiseRejectedResult => result.status === 'rejected');
      if (failed) throw failed.reason;
      progress(`${size} nodes booted (${nodes.map((node) => `${node.nodename} :${node.amqpPort}`).join(', ')})`);
      const [seed, ...others] = nodes;
      for (const node of others) {
        await node.ctl(['stop_app']);
        await node.ctl(['join_cluster', seed.nodename]);
        await node.startApp();
        progress(`${node.nodename} joined ${seed.nodename}`);
      }
      await cluster.waitForMembers(size, 60_000);
    } catch (err) {
      await cluster.remove().catch(() => undefined);
      throw err;
    }
    return cluster;
  }

  /** The names of the running members, as `node` sees them. */
  async runningNodes(node: BrokerNode = this.nodes[0]): Promise<string[]> {
    const out = await node.ctl(['cluster_status', '--formatter', 'json'], 30_000);
    const status = JSON.parse(out) as { running_nodes?: string[] };
    return status.running_nodes ?? [];
  }

  /** Waits until some running node sees `count` running members. */
  async waitForMembers(count: number, timeoutMs: number, via?: BrokerNode): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: string;
    for (;;) {
      try {
        const running = await this.runningNodes(via);
        if (running.length >= count) return;
        last = `running: ${running.join(', ')}`;
      } catch (err) {
        last = (err as Error).message;
      }
      if (Date.now() > deadline) throw new Error(`the cluster did not reach ${count} running nodes within ${timeoutMs} ms (${last})`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  /** Halts every node and deletes every directory; idempotent, each node's failure does not stop the others'. */
  async remove(): Promise<void> {
    const results = await Promise.allSettled(this.nodes.map((node) => node.remove()));
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
