import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { nodeLabel } from '../../src/broker/broker-nodes.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { loadConfig } from '../../src/config/load-config.js';
import { createLogger } from '../../src/logging/logger.js';
import { queuePolicies } from '../../src/topology/queue-policies.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerCluster } from '../helpers/broker-cluster.js';
import { brokerNodeUnsupported, freePorts, type BrokerNode } from '../helpers/broker-node.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import {
  JOBS,
  PREFETCH,
  STAGES,
  STALL_MS,
  TENANTS,
  logged,
  occurrences,
  pipelineInstances,
  pipelineQueues,
  pipelineStages,
  publishAfter,
  publishJobs,
  startInstances,
  tally as tallyResults,
  type PipelineInstance,
} from '../helpers/example-pipeline.js';
import { Supervisor } from '../helpers/supervisor.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * The example pipeline (converter -> matcher -> exporter) on a 3-node RabbitMQ cluster of this
 * machine, every queue quorum (`_default.type`), every process given all three nodes
 * (`AMQP_URL` with comma-separated URLs, the environment form of `broker.urls`): 10,000 jobs
 * flow while the node every stage process is connected to (the first listed, which also leads
 * every queue, declared through it) is halted and booted again. No job may be lost or
 * dead-lettered; duplicates (at-least-once) are counted, printed and bounded by the deliveries
 * the processes connected to the halted node had in hand; every process must reconnect to
 * another node by itself (no restart) and say so in its log and on `/readyz`.
 *
 * The cluster is this test's own (test/helpers/broker-cluster.ts): it never touches the main
 * broker, and its nodes and directories are removed afterwards, on failure too. A machine that
 * cannot start it (no rabbitmq-server, not root) fails the test with the reason: it is not skipped.
 */

const log = createLogger({ test: 'cluster' }, 'error');

interface Instance extends PipelineInstance {
  /** Its `/readyz` port. */
  httpPort: number;
}

interface QueueRow {
  type: string;
  ready: number;
  unacked: number;
  consumers: number;
  policy: string;
}

async function readyz(port: number): Promise<{ status: number; body: { ready?: boolean; node?: string; reason?: string } }> {
  const response = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: response.status, body: (await response.json()) as { ready?: boolean; node?: string } };
}

describe('cluster: quorum queues on a 3-node RabbitMQ cluster, the stages node halted and booted again', function () {
  this.timeout(300_000);
  let cluster: BrokerCluster | undefined;
  let project: ConfigFile | undefined;
  let supervisor: Supervisor | undefined;
  let resultsDir: string | undefined;
  let instances: Instance[] = [];
  /** The configuration as the processes read it: every node listed. */
  let clusterConfig: CompiledConfig | undefined;
  const began = Date.now();
  const note = (line: string) => console.log(`      [${((Date.now() - began) / 1000).toFixed(1)} s] ${line}`);

  before(async function () {
    this.timeout(180_000);
    // No skip: CI runs as root with rabbitmq-server installed, and a cluster that cannot start is a failure to see.
    const unsupported = brokerNodeUnsupported();
    if (unsupported) throw new Error(`the cluster test needs private RabbitMQ nodes: ${unsupported}`);
    cluster = await BrokerCluster.start({ progress: note });
    note(`cluster up: ${cluster.nodes.map((n) => `${n.nodename} :${n.amqpPort}`).join(', ')}`);
    const urls = cluster.urls;
    resultsDir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-cluster-results-'));
    const queues = await pipelineQueues();
    project = await writeConfigFile(
      {
        tenants: [...TENANTS],
        strict_queues: true,
        // Every queue of the example pipeline quorum, through `_default`.
        queues: { ...queues, _default: { ...queues._default, type: 'quorum' } },
        durable: true,
        httpPort: 0,
        broker: { urls, reconnect: { initialDelay: 0.2, maxDelay: 1 } },
        stages: pipelineStages(resultsDir),
      },
      STAGES,
      'cluster',
      urls[0],
    );
    await project.raw.close();
    clusterConfig = await loadConfig(project.file, { AMQP_URL: urls.join(',') });
    expect(clusterConfig.broker.urls).to.deep.equal(urls);
    // The queue settings as the policies `provision` would set (no management plugin on these
    // nodes, so through rabbitmqctl): the broker takes them on quorum queues.
    // rabbitmqctl costs an Erlang VM per call: side by side.
    const survivor = cluster.nodes[1];
    await Promise.all(
      queuePolicies(project.config, STAGES).map((policy) =>
        survivor.ctl([
          'set_policy',
          policy.name,
          policy.pattern,
          JSON.stringify(policy.definition),
          '--priority',
          String(policy.priority),
          '--apply-to',
          policy.applyTo,
        ]),
      ),
    );
    const { file } = project;
    const ports = await freePorts(7);
    instances = pipelineInstances().map((instance, index) => ({ ...instance, httpPort: ports[index] }));
    const sup = new Supervisor();
    supervisor = sup;
    await startInstances(
      sup,
      instances,
      file,
      (instance) => ({
        AMQP_URL: urls.join(','),
        STAGECOACH_HTTP_PORT: String(instance.httpPort),
        LOG_LEVEL: 'info',
      }),
      90_000,
    );
  });

  after(async () => {
    await supervisor?.stopAll().catch(() => undefined);
    if (resultsDir) await rm(resultsDir, { recursive: true, force: true });
    // Its broker objects go with the cluster.
    if (project) await rm(project.dir, { recursive: true, force: true });
    if (cluster) {
      const t = Date.now();
      await cluster.remove();
      note(`cluster removed in ${Date.now() - t} ms`);
    }
  });

  it('moves 10,000 jobs through quorum queues without a loss while the stages node is halted and booted; every stage fails over', async () => {
    const c = cluster as BrokerCluster;
    const sup = supervisor as Supervisor;
    const config = clusterConfig as CompiledConfig;
    const prefix = config.prefix;
    const names = (project as ConfigFile).names;
    const dir = resultsDir as string;
    const [victim, survivor] = c.nodes as [BrokerNode, BrokerNode, BrokerNode];
    const victimLabel = nodeLabel(victim.url);

    const queues = async (): Promise<Map<string, QueueRow>> => {
      const out = await survivor.ctl(
        ['list_queues', 'name', 'type', 'messages_ready', 'messages_unacknowledged', 'consumers', 'policy', '-q', '--no-table-headers'],
        30_000,
      );
      const rows = new Map<string, QueueRow>();
      for (const line of out.split('\n')) {
        const [name, type, ready, unacked, consumers, policy] = line.trim().split(/\t/);
        if (name?.startsWith(`${prefix}.`)) {
          rows.set(name, { type, ready: Number(ready), unacked: Number(unacked), consumers: Number(consumers), policy: policy ?? '' });
        }
      }
      return rows;
    };
    const tally = () => tallyResults(dir);
    /** `target` results, or the pipeline stalled (no new result for STALL_MS). */
    const progress = (target: number) => {
      let last = { distinct: -1, since: Date.now() };
      return waitFor(
        `${target} results, or a stalled pipeline`,
        async () => {
          const { distinct } = await tally();
          if (distinct >= target) return { outcome: 'reached' as const, distinct };
          if (distinct !== last.distinct) last = { distinct, since: Date.now() };
          else if (Date.now() - last.since > STALL_MS) return { outcome: 'stalled' as const, distinct };
          return undefined;
        },
        200_000,
        250,
      );
    };
    const diagnostics = async (): Promise<void> => {
      const rows = await queues().catch(() => new Map<string, QueueRow>());
      note(
        `queues: ${
          [...rows]
            .filter(([, r]) => r.ready + r.unacked > 0)
            .map(([n, r]) => `${n.slice(prefix.length + 1)} ${r.ready}+${r.unacked}u/${r.consumers}c`)
            .join(', ') || 'all empty'
        }`,
      );
      note(`exits: ${JSON.stringify(sup.exits)}`);
      for (const name of sup.names) {
        const warnings = sup
          .allStderr(name)
          .split('\n')
          .filter((l) => /"level":"(warn|error)"/.test(l))
          .map((l) => (/"message":"([^"]*)"/.exec(l)?.[1] ?? l.slice(0, 100)).replace(/\d+(\.\d+)?/g, '#'));
        const counts = new Map<string, number>();
        for (const w of warnings) counts.set(w, (counts.get(w) ?? 0) + 1);
        if (counts.size > 0) note(`${name} warnings: ${JSON.stringify(Object.fromEntries(counts))}`);
      }
    };

    try {
      // 0. What the cluster holds: every queue quorum (the delay ladder and unroutable too, see
      //    queue-type.ts), with 3 members, and the queue settings' policies applied.
      // The tracking log, the job cancels and the schedules are streams: replicated over the nodes by their own kind.
      const streams = [names.tracking, names.jobCancels, names.schedules];
      const declared = provisionTopology(config, STAGES)
        .queues.map((q) => q.name)
        .filter((name) => !streams.includes(name));
      const before = await queues();
      const notQuorum = declared.filter((name) => before.get(name)?.type !== 'quorum');
      expect(notQuorum, 'queues that are not quorum').to.deep.equal([]);
      expect(before.get(names.tracking)?.type, 'the tracking log').to.equal('stream');
      expect(before.get(names.jobCancels)?.type, 'the job cancels').to.equal('stream');
      expect(before.get(names.queue('conversions', 'acme'))?.policy, 'policy of a bounded quorum queue').to.equal(
        `${prefix}.queue.conversions`,
      );
      const members = await survivor.ctl(['list_queues', 'name', 'members', '-q', '--no-table-headers'], 30_000);
      const conversions = members.split('\n').find((line) => line.startsWith(`${names.queue('conversions', 'acme')}\t`)) ?? '';
      expect(occurrences(conversions, '@localhost'), `members of ${names.queue('conversions', 'acme')}`).to.equal(3);
      note(`${declared.length} queues, all quorum with 3 members; policies applied`);

      // 1. Every process on the first node listed: the one that goes down.
      for (const i of instances) {
        const first = logged(sup.stderr(i.name), 'connected to the broker')[0];
        expect(first?.node, `${i.name}: node connected to`).to.equal(victimLabel);
      }

      // 2. The jobs, all enqueued before the fault (persistent, on quorum queues).
      await publishJobs(config, log, 'cluster');
      note(`${JOBS} jobs published`);

      // 3. A third of the way through, the node goes down (the whole Erlang VM, not only the app).
      const step = await progress(Math.round(JOBS / 3));
      expect(step.outcome, 'progress before the node failure').to.equal('reached');
      const reconnectedBefore = new Map(instances.map((i) => [i.name, occurrences(sup.stderr(i.name), 'reconnected to the broker')]));
      note(`${step.distinct} results: halting ${victim.nodename} (${victimLabel}), which ${instances.length} stage processes use`);
      const halting = Date.now();
      await victim.halt();
      note(`${victim.nodename} halted in ${Date.now() - halting} ms`);
      await waitFor(
        'every stage process to reconnect to another node',
        () => instances.every((i) => occurrences(sup.stderr(i.name), 'reconnected to the broker') > (reconnectedBefore.get(i.name) ?? 0)),
        60_000,
        250,
      );
      const failover = instances.map((i) => {
        const line = logged(sup.stderr(i.name), 'reconnected to the broker').at(-1);
        return { name: i.name, node: String(line?.node) };
      });
      note(
        `every stage process reconnected to another node (seen when the halt returned, ${Date.now() - halting} ms after it began): ${failover.map((f) => `${f.name} -> ${f.node}`).join(', ')}`,
      );
      for (const f of failover) expect(f.node, `${f.name} reconnected to`).to.not.equal(victimLabel);
      const mid = await tally();
      note(`${mid.distinct} results while ${victim.nodename} is down; booting it again`);
      const booting = Date.now();
      await victim.boot();
      await c.waitForMembers(3, 90_000, survivor);
      note(`${victim.nodename} back in the cluster in ${Date.now() - booting} ms`);

      // 4. Everything through.
      const { outcome } = await progress(JOBS);
      const final = await tally();
      const rows = await queues();
      const dead = [...rows].filter(([name]) => name.startsWith(`${prefix}.dead.`) || name === names.unroutable);
      const deadCount = dead.reduce((sum, [, row]) => sum + row.ready + row.unacked, 0);
      // Each process connected to the halted node lost what it had in hand: at most its prefetch.
      const bound = instances.length * PREFETCH;
      const suspects = instances.reduce(
        (sum, i) => sum + logged(sup.allStderr(i.name), 'job redelivered after a crash; moved to the suspect queue to run alone').length,
        0,
      );
      note(
        `${outcome === 'reached' ? 'complete' : outcome}: ${final.distinct} of ${JOBS} jobs exported, ${final.missing.length} missing; ` +
          `duplicates: ${final.duplicates} (${final.sameJob} re-exports of the same job, ${final.duplicates - final.sameJob} re-emitted upstream), ` +
          `bound ${bound} = ${instances.length} processes x prefetch ${PREFETCH}; redeliveries moved to suspect queues: ${suspects}; ` +
          `dead letters and unroutable: ${deadCount}; own exits: ${sup.ownExits.length}`,
      );
      if (outcome !== 'reached' || sup.ownExits.length > 0 || deadCount > 0) await diagnostics();
      expect(final.missing, 'jobs never exported').to.have.length(0);
      expect(deadCount, 'dead letters and unroutable jobs').to.equal(0);
      expect(sup.ownExits, 'stage processes that exited (a failover is a reconnection, not a restart)').to.deep.equal([]);
      expect(final.duplicates, `duplicates, at most ${bound}`).to.be.at.most(bound);

      // 5. Every stage ready, on a node other than the one that went down, and consuming.
      for (const i of instances) {
        const { status, body } = await readyz(i.httpPort);
        expect(status, `${i.name} /readyz: ${JSON.stringify(body)}`).to.equal(200);
        expect(body.node, `${i.name} /readyz node`).to.be.a('string').and.not.equal(victimLabel);
      }
      await waitFor(
        'every queue empty',
        // Not the streams (tracking, job cancels): they keep their records, read by offset.
        async () => [...(await queues()).values()].every((row) => row.type === 'stream' || (row.ready === 0 && row.unacked === 0)),
        30_000,
        500,
      );
      // ...and a new job goes all the way through, published through any node.
      await publishAfter(config, log, dir, 'the job published after the failover');
      note('every stage ready on a surviving node; a new job went through end to end');
    } catch (err) {
      note(`FAILED: ${(err as Error).message}`);
      await diagnostics().catch(() => undefined);
      throw err;
    }
  });
});
