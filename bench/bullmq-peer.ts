import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Queue, Worker, type ConnectionOptions } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { processCpuNow } from './broker-cpu.js';
import { cpuNow, poll, round, stopProcess, waitDone, type BenchContext, type Mark, type Round } from './common.js';

/**
 * BullMQ, the peers scenario's other side (bench/peers.ts), on a private `redis-server` the bench
 * starts and stops: append-only file on, fsync every second (`--appendfsync everysec`, BullMQ's
 * usual durable setting), no RDB snapshots (`--save ''`: their forks would land in random
 * rounds), in a temporary directory. The relay is a worker of concurrency `--peer-concurrency`
 * whose processor adds the next job before it returns (so a job completes only once its output
 * is stored), jobs removed on completion (as an acknowledged AMQP message is gone).
 */
export class BullmqPeer {
  private server: ChildProcess | undefined;
  private dir: string | undefined;
  private connection: ConnectionOptions = {};
  private readonly queues = new Map<string, Queue>();

  constructor(
    private readonly ctx: BenchContext,
    private readonly prefix: string,
  ) {}

  async start(): Promise<void> {
    const port = await freePort();
    this.dir = mkdtempSync(path.join(os.tmpdir(), `${this.prefix}-redis-`));
    const server = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', '', '--dir', this.dir],
      { stdio: 'ignore' },
    );
    this.server = server;
    const spawned = new Promise<never>((_, reject) => server.once('error', (err) => reject(new Error(`redis-server: ${err.message}`))));
    this.connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
    // Connected to only once it listens: ioredis prints every refused attempt.
    const listening = poll(() => accepts(port), 15_000, 50);
    if (!(await Promise.race([listening, spawned]))) throw new Error(`redis-server did not listen on port ${port} within 15 s`);
  }

  get pid(): number | undefined {
    return this.server?.pid;
  }

  /** CPU of the redis-server, µs. */
  brokerCpu(): number | undefined {
    return this.pid === undefined ? undefined : processCpuNow([this.pid]);
  }

  queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (queue === undefined) this.queues.set(name, (queue = new Queue(`${this.prefix}-${name}`, { connection: this.connection })));
    return queue;
  }

  async fill(name: string, n: number, args: unknown[]): Promise<void> {
    const queue = this.queue(name);
    for (let sent = 0; sent < n; sent += 1000) {
      const count = Math.min(1000, n - sent);
      await queue.addBulk(Array.from({ length: count }, () => ({ name: 'bench.job', data: { args }, opts: { removeOnComplete: true } })));
    }
  }

  /**
   * Workers on `hops` (input -> output), all in this process, the last hop's started first;
   * timed from the first processor call of the first hop until the last hop completed `n`.
   */
  async round(hops: Array<[string, string]>, n: number, concurrency: number, what: string): Promise<Round> {
    let start: Mark | undefined;
    let completed = 0;
    let failure: (err: Error) => void = () => undefined;
    const failed = new Promise<Error>((resolve) => (failure = resolve));
    const workers: Worker[] = [];
    try {
      for (const [index, [input, output]] of [...hops.entries()].reverse()) {
        const next = this.queue(output);
        const first = index === 0;
        const last = index === hops.length - 1;
        const worker = new Worker(
          `${this.prefix}-${input}`,
          async (job) => {
            if (first && start === undefined) start = { at: performance.now(), cpu: cpuNow(), broker: this.brokerCpu() };
            await next.add(job.name, job.data as object, { removeOnComplete: true });
          },
          { connection: this.connection, concurrency },
        );
        worker.on('failed', (_, err) => failure(err));
        worker.on('error', (err) => failure(err));
        if (last) worker.on('completed', () => completed++);
        workers.push(worker);
      }
      const end = await waitDone(this.ctx, what, n, () => completed, failed);
      end.broker = this.brokerCpu();
      if (start === undefined) throw new Error(`${what}: the first worker never ran`);
      return round('bullmq', n, start, end);
    } finally {
      for (const worker of workers) await worker.close().catch(() => undefined);
    }
  }

  /** Fails unless the queues hold exactly these waiting jobs. */
  async expectWaiting(expected: Record<string, number>, what: string): Promise<void> {
    let seen: Record<string, number> = {};
    const ok = await poll(
      async () => {
        seen = {};
        for (const name of Object.keys(expected)) seen[name] = await this.queue(name).getWaitingCount();
        return Object.entries(expected).every(([name, count]) => seen[name] === count);
      },
      20_000,
      50,
    );
    if (!ok) throw new Error(`${what}: expected ${JSON.stringify(expected)} waiting jobs, redis has ${JSON.stringify(seen)}`);
  }

  /** Bytes of one waiting job of `name` as Redis stores it: its hash's fields and values. */
  async messageBytes(name: string): Promise<number | undefined> {
    const [job] = await this.queue(name).getWaiting(0, 0);
    if (job?.id === undefined) return undefined;
    const client = new Redis(this.connection as RedisOptions);
    try {
      const hash = await client.hgetall(`bull:${this.prefix}-${name}:${job.id}`);
      return Object.entries(hash).reduce((sum, [key, value]) => sum + Buffer.byteLength(key) + Buffer.byteLength(value), 0);
    } finally {
      client.disconnect();
    }
  }

  /** Closes the queues, stops redis-server, deletes its directory; never throws. */
  async stop(): Promise<void> {
    for (const queue of this.queues.values()) await queue.close().catch(() => undefined);
    this.queues.clear();
    const server = this.server;
    this.server = undefined;
    if (server !== undefined) await stopProcess(server, 'redis-server');
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
