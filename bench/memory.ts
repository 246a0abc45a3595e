import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { bodySize, fill, fmt, HERE, progress, purgeQueues, queueCount, sleep, TENANT, withTimeout, type BenchContext } from './common.js';

export interface MemorySample {
  backlog: number;
  /** Jobs the stage held (= prefetch when the backlog is larger). */
  held: number;
  /** Jobs still waiting in the queue while it was sampled. */
  waiting: number;
  /** VmHWM: the child's peak resident set, start-up included, MiB. */
  peakRssMiB: number;
  /** Highest VmRSS seen while sampling (the stage holding its prefetch), MiB. */
  sampledRssMiB: number;
  /** Highest V8 heapUsed the child reported while sampling, MiB. */
  heapUsedMiB: number;
}

export interface MemoryResult {
  scenario: 'memory';
  detail: string;
  small: MemorySample;
  large: MemorySample;
  /** large.peakRssMiB / small.peakRssMiB: ~1 when memory is bounded by prefetch, not backlog. */
  ratio: number;
}

/** Children still running, killed if the benchmark is interrupted. */
export const children = new Set<ChildProcess>();

const MiB = 1024 * 1024;

/**
 * The stage's peak resident memory while a backlog waits: for a small and a large backlog in
 * its input queue, a child process runs the `hold` stage (it takes `prefetch` deliveries and
 * holds them), and its RSS is sampled from /proc for a few seconds.
 */
export async function benchMemory(ctx: BenchContext): Promise<MemoryResult> {
  const queue = ctx.names.queue('mem_in', TENANT);
  progress(
    `memory: backlog ${fmt(ctx.opts.smallBacklog)} vs ${fmt(ctx.opts.backlog)}, prefetch ${ctx.opts.prefetch}, ${bodySize(ctx.opts.size)} B bodies`,
  );
  const samples: MemorySample[] = [];
  try {
    for (const backlog of [ctx.opts.smallBacklog, ctx.opts.backlog]) {
      // Non-persistent: the stage sees the same bodies, and 200,000 jobs go in several times faster.
      await fill(ctx, 'mem_in', backlog, { persistent: false, window: 5000 });
      await sleep(500);
      samples.push(await measure(ctx, backlog, queue));
      await purgeQueues(ctx.opts.url, [queue]);
    }
  } finally {
    await purgeQueues(ctx.opts.url, [queue]).catch(() => undefined);
  }
  const [small, large] = samples as [MemorySample, MemorySample];
  return {
    scenario: 'memory',
    detail: `stage RSS, prefetch ${ctx.opts.prefetch}`,
    small,
    large,
    ratio: large.peakRssMiB / small.peakRssMiB,
  };
}

async function measure(ctx: BenchContext, backlog: number, queue: string): Promise<MemorySample> {
  const expect = Math.min(ctx.opts.prefetch, backlog);
  const child = spawn(process.execPath, [path.join(HERE, 'memory-child.js')], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    env: { ...process.env, BENCH_MEMORY_CHILD: JSON.stringify({ raw: ctx.raw, source: ctx.source, tenant: TENANT, expect }) },
  });
  children.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let heapUsed = 0;
  let held = 0;
  const ready = new Promise<void>((resolve, reject) => {
    child.on('message', (message: { kind: string; message?: string; heapUsed?: number; held?: number }) => {
      if (message.kind === 'ready') resolve();
      if (message.kind === 'error') reject(new Error(`memory child (backlog ${backlog}): ${message.message}`));
      if (message.kind === 'sample' || message.kind === 'ready') {
        heapUsed = Math.max(heapUsed, message.heapUsed ?? 0);
        held = message.held ?? held;
      }
    });
    void exited.then((code) =>
      reject(new Error(`memory child (backlog ${backlog}) exited with ${code} before it was ready: ${stderr.trim()}`)),
    );
  });
  try {
    await withTimeout(ready, 90_000, `memory child (backlog ${backlog}) to hold ${expect} jobs`);
    heapUsed = 0;
    let sampled = 0;
    let peak = 0;
    const until = performance.now() + ctx.opts.memSampleMs;
    while (performance.now() < until) {
      const status = await readStatus(child.pid as number).catch(() => {
        throw new Error(`memory child (backlog ${backlog}) exited while it was sampled: ${stderr.trim().slice(-500)}`);
      });
      sampled = Math.max(sampled, status.rss);
      peak = Math.max(peak, status.hwm);
      await sleep(100);
    }
    const waiting = await queueCount(ctx.opts.url, queue);
    const sample: MemorySample = {
      backlog,
      held,
      waiting,
      peakRssMiB: peak / MiB,
      sampledRssMiB: sampled / MiB,
      heapUsedMiB: heapUsed / MiB,
    };
    progress(
      `    backlog ${fmt(backlog).padStart(7)}: holds ${held}, ${fmt(waiting)} waiting; peak RSS ${sample.peakRssMiB.toFixed(1)} MiB, ` +
        `RSS while holding ${sample.sampledRssMiB.toFixed(1)} MiB, heap ${sample.heapUsedMiB.toFixed(1)} MiB`,
    );
    return sample;
  } finally {
    child.send('stop', () => undefined);
    const code = await withTimeout(exited, 30_000, 'memory child to stop').catch(() => {
      child.kill('SIGKILL');
      return 'killed';
    });
    children.delete(child);
    if (code !== 0) progress(`  warning: memory child exited with ${String(code)}: ${stderr.trim().slice(-500)}`);
  }
}

/** VmRSS and VmHWM of a process, bytes. */
export async function readStatus(pid: number): Promise<{ rss: number; hwm: number }> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}
