import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Job } from '../../src/job/job.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { BrokerNode, brokerNodeUnsupported } from '../helpers/broker-node.js';
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
import { RawBroker } from '../helpers/raw-broker.js';
import { Supervisor } from '../helpers/supervisor.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * The fault test of the example pipeline (converter -> matcher -> exporter), on a private
 * RabbitMQ node so that its broker can be restarted without disturbing anyone else:
 * 10,000 jobs flow while a random busy stage process is SIGKILLed 5 times (and restarted, as a
 * container runtime would) and the broker application is stopped and started once. No job may
 * be lost or dead-lettered; duplicates (at-least-once) are counted and bounded by the deliveries
 * a crash can leave unacknowledged: prefetch per crashed process, the broker restart counting
 * once per stage process connected to it.
 *
 * `FAULT_SEED=<n>` replays the same choice of victims.
 */

/**
 * The faults, in order. Each strikes by progress rather than by time: when the distinct results
 * have gone an equal share of the way from where the previous fault left them to the end (the
 * pipeline goes on while the broker restarts, so the later faults are spread over what is left).
 */
const FAULTS: Array<'kill' | 'broker restart'> = ['kill', 'kill', 'broker restart', 'kill', 'kill', 'kill'];
const log = createLogger({ test: 'faults' }, 'error');

/** A `stagecoach run` process of the pipeline, with the queues it consumes. */
interface Instance extends PipelineInstance {
  /** Its physical input queue and that queue's `due` companion. */
  queues: [string, string];
}

interface QueueRow {
  ready: number;
  unacked: number;
  consumers: number;
}

/** A small seeded generator (mulberry32), so a run's victims can be replayed. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Ready counts over AMQP: cheap and exact (rabbitmqctl costs an Erlang VM per call); reconnects after the broker restart. */
class Backlog {
  private raw: RawBroker | undefined;

  constructor(private readonly url: string) {}

  async ready(queues: readonly string[]): Promise<Map<string, number>> {
    for (let attempt = 0; ; attempt++) {
      try {
        this.raw ??= await RawBroker.connect(this.url);
        const counts = await this.raw.counts(queues);
        if (Object.values(counts).some((count) => count === undefined)) throw new Error(`cannot count ${queues.join(', ')}`);
        return new Map(Object.entries(counts) as Array<[string, number]>);
      } catch (err) {
        await this.raw?.close();
        this.raw = undefined;
        if (attempt >= 1) throw err;
      }
    }
  }

  async close(): Promise<void> {
    await this.raw?.close();
  }
}

describe('faults: SIGKILLed stage processes and a broker restart (private broker node)', function () {
  this.timeout(240_000);
  let node: BrokerNode | undefined;
  let project: ConfigFile | undefined;
  let supervisor: Supervisor | undefined;
  let resultsDir: string | undefined;
  let instances: Instance[] = [];

  before(async function () {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) {
      console.log(`      skipped: ${unsupported}`);
      this.skip();
    }
    node = await BrokerNode.start({ name: `stagecoach-fault-${randomBytes(3).toString('hex')}` });
    console.log(`      private node ${node.nodename}, AMQP port ${node.amqpPort}, dist port ${node.distPort}: up in ${node.startMs} ms`);
    resultsDir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-fault-results-'));
    project = await writeConfigFile(
      {
        tenants: [...TENANTS],
        strict_queues: true,
        queues: await pipelineQueues(),
        // A broker restart keeps only durable queues and persistent messages.
        durable: true,
        httpPort: 0,
        broker: { url: node.url, reconnect: { initialDelay: 0.2, maxDelay: 1 } },
        stages: pipelineStages(resultsDir),
      },
      STAGES,
      'fault',
      node.url,
    );
    // Only the processes talk to the node from here on: the helper's client would die with the restart.
    await project.raw.close();
    const { names, file } = project;
    instances = pipelineInstances().map((instance) => ({
      ...instance,
      queues: [
        names.queue(instance.input, instance.tenant, instance.variant),
        names.dueQueue(instance.input, instance.tenant, instance.variant),
      ],
    }));
    const sup = new Supervisor();
    supervisor = sup;
    const url = node.url;
    await startInstances(sup, instances, file, () => ({ AMQP_URL: url, STAGECOACH_HTTP_PORT: '0', LOG_LEVEL: 'info' }), 60_000);
  });

  after(async () => {
    await supervisor?.stopAll().catch(() => undefined);
    await project?.remove().catch(() => undefined);
    if (resultsDir) await rm(resultsDir, { recursive: true, force: true });
    await node?.remove();
  });

  it('loses no job of 10,000 while stage processes are SIGKILLed 5 times and the broker restarts, and keeps consuming', async () => {
    const broker = node as BrokerNode;
    const sup = supervisor as Supervisor;
    const { config, names } = project as ConfigFile;
    const prefix = config.prefix;
    const dir = resultsDir as string;
    const seed = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const random = seeded(seed);
    const began = Date.now();
    const elapsed = () => `${((Date.now() - began) / 1000).toFixed(1)} s`;
    const note = (line: string) => console.log(`      [${elapsed()}] ${line}`);
    note(`seed ${seed} (FAULT_SEED=${seed} replays the victims)`);

    const queues = async (): Promise<Map<string, QueueRow>> => {
      const out = await broker.ctl(
        ['list_queues', 'name', 'messages_ready', 'messages_unacknowledged', 'consumers', '-q', '--no-table-headers'],
        20_000,
      );
      const rows = new Map<string, QueueRow>();
      for (const line of out.split('\n')) {
        const [name, ready, unacked, consumers] = line.trim().split(/\s+/);
        if (name?.startsWith(`${prefix}.`))
          rows.set(name, { ready: Number(ready), unacked: Number(unacked), consumers: Number(consumers) });
      }
      return rows;
    };
    const busyQueues = (rows: Map<string, QueueRow>) =>
      [...rows]
        .filter(([, row]) => row.ready + row.unacked > 0)
        .map(([name, row]) => `${name.slice(prefix.length + 1)} ${row.ready}+${row.unacked}u/${row.consumers}c`)
        .join(', ') || `none of ${rows.size}`;

    const tally = () => tallyResults(dir);

    const consuming = (name: string) => sup.alive(name) && sup.stderr(name).includes('"stage consuming"');
    /** Every JSON log line of every process with this message. */
    const loggedByAny = (message: string): Array<Record<string, unknown>> =>
      sup.names.flatMap((name) => logged(sup.allStderr(name), message));

    /**
     * Waits until `target` jobs are exported; or until the pipeline is at rest short of it (no
     * result for a while and nothing left to deliver anywhere but in dead letters and the
     * unroutable queue: jobs were lost), or stalled (no new result for STALL_MS).
     */
    const progress = (target: number): Promise<{ outcome: 'reached' | 'at rest' | 'stalled'; distinct: number }> => {
      let last = { distinct: -1, since: Date.now(), quiet: 0 };
      return waitFor(
        `${target} results, or a pipeline at rest or stalled`,
        async () => {
          const { distinct } = await tally();
          if (distinct >= target) return { outcome: 'reached' as const, distinct };
          if (distinct !== last.distinct) {
            last = { distinct, since: Date.now(), quiet: 0 };
            return undefined;
          }
          // rabbitmqctl costs an Erlang VM: asked only once the results stopped moving.
          if (Date.now() - last.since < 2_000) return undefined;
          const rows = await queues();
          const pending = [...rows]
            .filter(([name]) => !name.startsWith(`${prefix}.dead.`) && name !== names.unroutable)
            .some(([, row]) => row.ready + row.unacked > 0);
          last.quiet = pending ? 0 : last.quiet + 1;
          if (last.quiet >= 2) return { outcome: 'at rest' as const, distinct };
          if (Date.now() - last.since > STALL_MS) return { outcome: 'stalled' as const, distinct };
          return undefined;
        },
        150_000,
        250,
      );
    };

    let diagnosed = false;
    const diagnostics = async (): Promise<void> => {
      if (diagnosed) return;
      diagnosed = true;
      const t = await tally();
      note(`results: ${t.distinct} distinct of ${JOBS}, ${t.lines} lines; missing e.g. ${t.missing.slice(0, 5).join(', ') || 'none'}`);
      note(`queues: ${await queues().then(busyQueues, (err: Error) => `unreadable (${err.message})`)}`);
      note(
        `processes: ${sup.names.map((n) => `${n} ${sup.alive(n) ? (consuming(n) ? 'consuming' : 'up, not consuming') : 'down'}`).join('; ')}`,
      );
      note(`exits: ${JSON.stringify(sup.exits.map((e) => ({ name: e.name, code: e.code, signal: e.signal, killed: e.killed })))}`);
      for (const name of sup.names) {
        const lines = sup
          .allStderr(name)
          .split('\n')
          .filter((l) => /"level":"(warn|error)"/.test(l));
        const byMessage = new Map<string, number>();
        for (const l of lines) {
          const message = (/"message":"([^"]*)"/.exec(l)?.[1] ?? l.slice(0, 80)).replace(/\d+(\.\d+)?/g, '#');
          byMessage.set(message, (byMessage.get(message) ?? 0) + 1);
        }
        if (byMessage.size > 0) note(`${name} warnings: ${JSON.stringify(Object.fromEntries(byMessage))}`);
        // What is not a log line: the command line's own last word (a fatal error).
        const plain = sup
          .allStderr(name)
          .split('\n')
          .filter((l) => l.trim() && !l.startsWith('{'));
        if (plain.length > 0) note(`${name} said: ${plain.slice(-3).join(' | ')}`);
      }
    };

    const backlog = new Backlog(broker.url);
    try {
      // 1. The jobs, all enqueued before the faults start (persistent, on durable queues).
      await publishJobs(config, log, 'faults');
      note(`${JOBS} jobs published`);

      // 2. The faults, each when the results reach its mark.
      let connectedAtRestart = 0;
      let applied = 0;
      let kills = 0;
      let after = 0;
      for (const [index, fault] of FAULTS.entries()) {
        const at = Math.round(after + (JOBS - after) / (FAULTS.length - index + 1));
        const step = await progress(at);
        if (step.outcome !== 'reached') {
          note(`the pipeline is ${step.outcome} at ${step.distinct} results, short of ${at}: no more faults`);
          break;
        }
        const reached = step.distinct;
        const ready = await backlog.ready(instances.flatMap((i) => i.queues));
        const backlogs = instances
          .filter((i) => i.queues.some((q) => (ready.get(q) ?? 0) > 0))
          .map((i) => `${i.name} ${i.queues.map((q) => ready.get(q)).join('+')}`)
          .join(', ');
        if (fault === 'kill') {
          // A random process among those with a backlog, which hold a full prefetch window (a kill
          // of an idle one tests nothing); any consuming one when none has.
          const up = instances.filter((i) => consuming(i.name));
          const busy = up.filter((i) => i.queues.some((q) => (ready.get(q) ?? 0) > 0));
          const pool = busy.length > 0 ? busy : up.length > 0 ? up : instances;
          const victim = pool[Math.floor(random() * pool.length)];
          sup.kill(victim.name, 'SIGKILL');
          kills++;
          note(`${reached} results: SIGKILL ${victim.name} (backlogs: ${backlogs || 'none'})`);
        } else {
          const connected = instances.filter((i) => consuming(i.name)).map((i) => i.name);
          connectedAtRestart = connected.length;
          const lost = new Map(connected.map((n) => [n, occurrences(sup.stderr(n), 'broker connection lost')]));
          const refused = new Map(connected.map((n) => [n, occurrences(sup.stderr(n), 'cannot reach the broker')]));
          const reconnected = new Map(connected.map((n) => [n, occurrences(sup.stderr(n), 'reconnected to the broker')]));
          // A process that dies meanwhile is left out (its exit counts as a crash of its own).
          const runs = new Map(connected.map((n) => [n, sup.run(n)]));
          const stillConnected = () => connected.filter((n) => sup.run(n) === runs.get(n) && sup.alive(n));
          note(`${reached} results: rabbitmqctl stop_app (${connected.length} stage processes connected; backlogs: ${backlogs || 'none'})`);
          const stopping = Date.now();
          await broker.stopApp();
          const stopped = Date.now();
          note(`stop_app took ${stopped - stopping} ms`);
          // Down long enough that every process has lost its connection and failed to reconnect.
          await waitFor(
            'every stage process to lose its connection and fail to reconnect',
            () =>
              stillConnected().every(
                (n) =>
                  occurrences(sup.stderr(n), 'broker connection lost') > (lost.get(n) ?? 0) &&
                  occurrences(sup.stderr(n), 'cannot reach the broker') > (refused.get(n) ?? 0),
              ),
            30_000,
          );
          await broker.startApp();
          note(`rabbitmqctl start_app after ${Date.now() - stopped} ms down`);
          await waitFor(
            'every stage process to reconnect',
            () => stillConnected().every((n) => occurrences(sup.stderr(n), 'reconnected to the broker') > (reconnected.get(n) ?? 0)),
            60_000,
          );
          note('every stage process reconnected');
        }
        applied++;
        after = (await tally()).distinct;
      }

      // 3. Everything through, or the pipeline at rest or stalled.
      const { outcome } = await progress(JOBS);
      const final = await tally();
      const rows = await queues();
      const dead = [...rows].filter(([name]) => name.startsWith(`${prefix}.dead.`) || name === names.unroutable);
      const deadCount = dead.reduce((sum, [, row]) => sum + row.ready + row.unacked, 0);
      const ownExits = sup.ownExits.length;
      const crashes = kills + connectedAtRestart + ownExits;
      const bound = crashes * PREFETCH;
      note(
        `${outcome === 'reached' ? 'complete' : outcome}: ${final.distinct} of ${JOBS} jobs exported, ` +
          `${final.missing.length} ${outcome === 'stalled' ? 'stuck' : 'lost'}`,
      );
      note(
        `duplicates: ${final.duplicates} (${final.sameJob} re-exports of the same job, ${final.duplicates - final.sameJob} re-emitted upstream); ` +
          `bound ${bound} = ${crashes} crashes (${kills} kills + ${connectedAtRestart} processes at the broker restart + ${ownExits} exits of their own) x prefetch ${PREFETCH}`,
      );
      // The framework's own account: a redelivery is moved to a suspect queue, its attempt counted
      // (unjudged), and a crash while running alone is judged POISON and retried from there.
      const crashRetries = [
        ...loggedByAny('job redelivered after a crash; moved to the suspect queue to run alone'),
        ...loggedByAny('job retry scheduled').filter((line) => line.error_type === 'POISON'),
      ];
      const byAttempt = new Map<unknown, number>();
      for (const line of crashRetries) byAttempt.set(line.next_attempt, (byAttempt.get(line.next_attempt) ?? 0) + 1);
      note(
        `restarts: ${sup.restarts}; redeliveries taken for crashes (moved to a suspect queue or retried from it): ${crashRetries.length}, ` +
          `by the attempt they moved to: ${JSON.stringify(Object.fromEntries(byAttempt))}; ` +
          `dead-lettered (logged): ${loggedByAny('job dead-lettered').length}; dead letters and unroutable on the broker: ${deadCount}`,
      );
      if (deadCount > 0) {
        const raw = await RawBroker.connect(broker.url);
        try {
          for (const [queue] of dead) {
            const letters = await raw.drain(queue);
            if (letters.length === 0) continue;
            const kinds = new Map<string, number>();
            for (const letter of letters) {
              const job = JSON.parse(letter.content.toString()) as Job;
              const kind = `${job.error?.type ?? String(letter.properties.headers?.['x-ojs-error-type'])} at attempt ${job.attempt}`;
              kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
            }
            note(`${queue}: ${letters.length} (${JSON.stringify(Object.fromEntries(kinds))})`);
          }
        } finally {
          await raw.close();
        }
      }
      if (outcome !== 'reached' || ownExits > 0) await diagnostics();

      expect(final.missing, `jobs never exported (${outcome === 'stalled' ? 'stuck' : 'lost'}: ${final.missing.length})`).to.have.length(0);
      expect(deadCount, 'dead letters and unroutable jobs').to.equal(0);
      expect(applied, 'faults applied').to.equal(FAULTS.length);
      expect(final.duplicates, `duplicates, at most ${bound}`).to.be.at.most(bound);

      // 4. Every stage back consuming: consumers on every input and `due` queue, queues drained.
      await waitFor(
        'a consumer on every input and due queue',
        async () => {
          const now = await queues();
          return instances.every((i) => i.queues.every((q) => (now.get(q)?.consumers ?? 0) >= 1));
        },
        30_000,
        500,
      );
      await waitFor(
        'every queue empty',
        // The tracking and job-cancels streams keep what they hold: not queues to drain.
        async () =>
          [...(await queues()).entries()].every(
            ([name, row]) => name.endsWith('.tracking') || name.endsWith('.job-cancels') || (row.ready === 0 && row.unacked === 0),
          ),
        30_000,
        500,
      );
      // ...and a new job goes all the way through.
      await publishAfter(config, log, dir, 'the job published after the faults');
      note('a new job went through end to end');
    } catch (err) {
      note(`FAILED: ${(err as Error).message}`);
      await diagnostics().catch(() => undefined);
      throw err;
    } finally {
      await backlog.close();
    }
  });
});
