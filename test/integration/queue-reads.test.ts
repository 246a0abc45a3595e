import { spawn } from 'node:child_process';
import { expect } from 'chai';
import { withReadLock } from '../../src/broker/read-lock.js';
import { exclusiveRead, peek } from '../../src/broker/peek.js';
import { openConnection } from '../../src/broker/amqp-connection.js';
import { StagecoachError } from '../../src/errors/errors.js';
import { finished, REPO_ROOT, spawnCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { waitFor } from '../helpers/wait-for.js';
import { listDeadLetters, retryDeadLetters, type DeadLetterEntry } from '../../src/dead-letters/dead-letter-actions.js';
import { declareTopologyOnce } from '../../src/broker/declare-topology.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { peekMessage } from '../../src/dashboard/peek-message.js';
import { createJob } from '../../src/job/envelope.js';
import { toWire } from '../../src/job/amqp-mapping.js';
import { createLogger } from '../../src/logging/logger.js';
import { MemoryPayloadStore } from '../../src/payload/memory-payload-store.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { provisionTopology } from '../../src/topology/build-topology.js';
import { BrokerNames } from '../../src/topology/names.js';
import { RawBroker } from '../helpers/raw-broker.js';

const log = createLogger({ test: 'queue-reads' }, 'error');

/**
 * Reads that hold messages unacknowledged until their channel closes (a listing, a peek, a
 * retry) take each other's messages when they overlap: the admin server, whose dashboard
 * refreshes a dead-letter list every few seconds while an operator opens a body or retries,
 * runs them one at a time.
 */
describe('reads of one queue in one process (dead-letter listing, peek, retry)', function () {
  this.timeout(60_000);
  let config: CompiledConfig;
  let raw: RawBroker;
  let deadQueue: string;
  const ids: string[] = [];

  before(async () => {
    config = withTestConfig({ tenants: ['acme'], queues: { in: {} } });
    await declareTopologyOnce(config, provisionTopology(config, []), log);
    raw = await RawBroker.connect(config.broker.url);
    deadQueue = new BrokerNames(config.prefix).deadQueue('in', 'acme');
    for (let i = 0; i < 5; i++) {
      const job = createJob({ type: 'doc', args: [i] }, { queue: 'in', tenant: 'acme' });
      const wire = toWire({ ...job, error: { type: 'RefusedError', message: 'no' } }, { tenantHeader: config.tenantHeader });
      await raw.publish('', deadQueue, wire.content, wire.options);
      ids.push(job.id);
    }
  });

  after(async () => {
    await raw?.close();
    await teardown(config, []);
  });

  it('never finds the queue emptied by another read running at the same moment', async () => {
    const store = new MemoryPayloadStore();
    for (let round = 0; round < 10; round++) {
      const list = (): Promise<DeadLetterEntry[]> => listDeadLetters(config, 'in', 'acme', log, 100, store);
      const [first, peeked, last] = await Promise.all([
        list(),
        Promise.all(ids.map((id) => peekMessage(config, log, deadQueue, id, store))),
        list(),
      ]);
      expect(first.map((entry) => entry.id)).to.deep.equal(ids);
      expect(last.map((entry) => entry.id)).to.deep.equal(ids);
      expect(peeked.map((message) => message.message_id)).to.deep.equal(ids);
    }
    expect(await raw.count(deadQueue)).to.equal(5);
  });

  it('retries every dead letter while listings of the queue run beside it', async () => {
    const store = new MemoryPayloadStore();
    const [, retried] = await Promise.all([
      listDeadLetters(config, 'in', 'acme', log, 100, store),
      retryDeadLetters(config, 'in', 'acme', log),
      listDeadLetters(config, 'in', 'acme', log, 100, store),
    ]);
    expect(retried).to.include({ retried: 5 });
    expect(await raw.count(deadQueue)).to.equal(0);
  });
});

/**
 * The same reads from two processes (a `stagecoach dead list` in a terminal beside the admin
 * server) take the broker's read lock of the prefix: one holds it while it holds messages, the
 * other waits, and reads everything once the first is done.
 */
describe('reads of one queue from two processes (the read lock)', function () {
  this.timeout(60_000);
  let project: ConfigFile;
  let deadQueue: string;
  const ids: string[] = [];

  before(async () => {
    project = await writeConfigFile({ tenants: ['acme'], queues: { in: {} } }, [], 'queue-reads');
    deadQueue = project.names.deadQueue('in', 'acme');
    for (let i = 0; i < 3; i++) {
      const job = createJob({ type: 'doc', args: [i] }, { queue: 'in', tenant: 'acme' });
      const wire = toWire({ ...job, error: { type: 'RefusedError', message: 'no' } }, { tenantHeader: project.config.tenantHeader });
      await project.raw.publish('', deadQueue, wire.content, wire.options);
      ids.push(job.id);
    }
  });

  after(async () => {
    await project?.remove();
  });

  /** A read in this process that holds every dead letter until `release` is called. */
  async function holdAll(): Promise<{ release: () => void; done: Promise<void> }> {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let held = -1;
    const done = exclusiveRead(project.config, log, async () => {
      const connection = await openConnection(project.config, log, 'test-holder');
      try {
        held = (await peek(await connection.createChannel(), deadQueue, 100)).length;
        await released;
      } finally {
        await connection.close();
      }
    });
    await waitFor('this process holding every dead letter', () => held === ids.length, 15_000);
    return { release, done };
  }

  it('a `stagecoach dead list` in another process waits for a read under way here, then lists every dead letter', async () => {
    const holder = await holdAll();
    const cli = spawnCli(['dead', 'list', 'in', '--tenant', 'acme', '--json', '--config', project.file]);
    try {
      await waitFor('the command waiting for the read lock', () => cli.err.includes('waiting for the read lock'), 20_000);
      holder.release();
      await holder.done;
      const { code, stdout } = await finished(cli, 30_000, 'dead list');
      expect(code).to.equal(0);
      expect((JSON.parse(stdout) as DeadLetterEntry[]).map((entry) => entry.id)).to.deep.equal(ids);
    } finally {
      holder.release();
      if (cli.exitCode === null && cli.signalCode === null) cli.kill('SIGKILL');
    }
    expect(await project.raw.count(deadQueue)).to.equal(ids.length);
  });

  it('gives up with CONFLICT, naming the lock, when the other read does not end in time; a crashed holder leaves no lock', async () => {
    const holder = await holdAll();
    try {
      const err = await withReadLock(project.config, log, () => Promise.resolve('read'), 300).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(StagecoachError).and.to.include({ code: 'CONFLICT' });
      expect((err as Error).message).to.contain(project.names.readLock);
    } finally {
      holder.release();
      await holder.done;
    }
    // A process killed while it holds the lock: its connection closes, and the broker deletes the lock with it.
    const holderProcess = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { loadConfig } from './dist/src/config/load-config.js';
         import { withReadLock } from './dist/src/broker/read-lock.js';
         import { createLogger } from './dist/src/logging/logger.js';
         const config = await loadConfig(process.argv[1], process.env);
         await withReadLock(config, createLogger({}, 'error'), () => { console.log('held'); return new Promise(() => {}); });`,
        project.file,
      ],
      { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    holderProcess.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await waitFor('another process holding the read lock', () => out.includes('held'), 20_000);
    const err = await withReadLock(project.config, log, () => Promise.resolve('read'), 300).catch((e: unknown) => e);
    expect(err, 'held by the other process').to.be.instanceOf(StagecoachError).and.to.include({ code: 'CONFLICT' });
    holderProcess.kill('SIGKILL');
    expect(await withReadLock(project.config, log, () => Promise.resolve('read'), 10_000)).to.equal('read');
  });
});
