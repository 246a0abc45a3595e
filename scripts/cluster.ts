/**
 * A 3-node RabbitMQ cluster on this machine, for trying stagecoach's quorum queues and failover
 * locally (docs/cluster.md): `scripts/cluster.sh up | status | down`.
 *
 * The nodes are the test suite's private nodes (test/helpers/broker-cluster.ts): their own node
 * names (`stagecoach-cluster-<n>@localhost`), AMQP ports (default 5681-5683, env
 * CLUSTER_PORTS=a,b,c), Erlang distribution ports, and directories under CLUSTER_DIR (default
 * /tmp/stagecoach-cluster), owned by the rabbitmq user. They never touch the system's broker on
 * 5672. `up` leaves them running and writes `cluster.json` there; `down` stops them and deletes
 * the directory. Needs rabbitmq-server and root (the package's scripts drop to the rabbitmq user).
 *
 * With `--management`, every node runs the management plugin (on a free port each, printed), so
 * that `stagecoach provision` can set the queue policies: give it one with
 * STAGECOACH_MANAGEMENT_URL.
 */
import { execFile } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { BrokerCluster } from '../test/helpers/broker-cluster.js';

const run = promisify(execFile);
const DIR = path.resolve(process.env.CLUSTER_DIR ?? '/tmp/stagecoach-cluster');
const STATE = path.join(DIR, 'cluster.json');
const NAME = 'stagecoach-cluster';

interface ClusterState {
  nodes: Array<{ nodename: string; url: string; dir: string; pidFile: string; managementPort?: number }>;
}

async function state(): Promise<ClusterState | undefined> {
  try {
    return JSON.parse(await readFile(STATE, 'utf8')) as ClusterState;
  } catch {
    return undefined;
  }
}

async function ctl(nodename: string, args: string[]): Promise<string> {
  const { stdout } = await run('rabbitmqctl', ['-n', nodename, ...args], { timeout: 60_000 });
  return stdout;
}

async function up(management: boolean): Promise<number> {
  if (await state()) {
    console.error(`a cluster is up already (${STATE}): scripts/cluster.sh down first`);
    return 1;
  }
  const ports = (process.env.CLUSTER_PORTS ?? '5681,5682,5683').split(',').map(Number);
  if (ports.length !== 3 || ports.some((port) => !Number.isInteger(port) || port <= 0)) {
    console.error('CLUSTER_PORTS must be three ports, comma-separated');
    return 2;
  }
  const cluster = await BrokerCluster.start({
    name: NAME,
    amqpPorts: ports,
    dirs: ports.map((_, index) => path.join(DIR, `node-${index + 1}`)),
    plugins: management ? ['rabbitmq_management'] : [],
    keep: true,
    progress: (line) => console.error(line),
  });
  const nodes = cluster.nodes.map((node) => ({
    nodename: node.nodename,
    url: node.url,
    dir: node.dir,
    pidFile: node.pidFile,
    ...(node.managementPort === undefined ? {} : { managementPort: node.managementPort }),
  }));
  await writeFile(STATE, `${JSON.stringify({ nodes }, null, 2)}\n`);
  console.log(`cluster up: ${nodes.map((node) => node.nodename).join(', ')}`);
  for (const node of nodes) {
    console.log(
      `  ${node.nodename}  ${node.url}${node.managementPort === undefined ? '' : `  management http://127.0.0.1:${node.managementPort}/`}`,
    );
  }
  console.log(`\nexport AMQP_URL=${nodes.map((node) => node.url).join(',')}`);
  if (nodes[0].managementPort !== undefined)
    console.log(`export STAGECOACH_MANAGEMENT_URL=http://guest:guest@127.0.0.1:${nodes[0].managementPort}/`);
  return 0;
}

async function status(): Promise<number> {
  const current = await state();
  if (!current) {
    console.log('no cluster is up');
    return 1;
  }
  for (const node of current.nodes) {
    const answer = await ctl(node.nodename, ['cluster_status', '--formatter', 'json']).then(
      (out) => `running nodes: ${(JSON.parse(out) as { running_nodes?: string[] }).running_nodes?.join(', ') ?? '?'}`,
      () => 'down',
    );
    console.log(`${node.nodename} ${node.url}: ${answer}`);
  }
  return 0;
}

async function down(): Promise<number> {
  const current = await state();
  if (!current) {
    console.log('no cluster is up');
    return 0;
  }
  for (const node of current.nodes) {
    // `stop <pid file>` waits until the VM is gone; a node down already makes it fail, which is fine.
    await ctl(node.nodename, ['stop', node.pidFile]).catch(async () => {
      const pid = Number((await readFile(node.pidFile, 'utf8').catch(() => '')).trim());
      if (pid > 0) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    });
    console.log(`${node.nodename} stopped`);
  }
  await rm(DIR, { recursive: true, force: true });
  console.log(`${DIR} removed`);
  return 0;
}

async function main(): Promise<number> {
  const [command, ...flags] = process.argv.slice(2);
  switch (command) {
    case 'up':
      return up(flags.includes('--management'));
    case 'status':
      return status();
    case 'down':
      return down();
    default:
      console.error('usage: scripts/cluster.sh up [--management] | status | down');
      return 2;
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`cluster: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
