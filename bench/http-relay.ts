import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  expectCounts,
  fill,
  fmt,
  HERE,
  JOB_TYPE,
  progress,
  purgeQueues,
  sleep,
  stopProcess,
  summarise,
  TENANT,
  withTimeout,
  type BenchContext,
  type Round,
  type ThroughputResult,
} from './common.js';
import { physical, SETTLE_MS, stagecoachRound } from './throughput.js';
import { brokerCpuNow } from './broker-cpu.js';

/** Slots of one worker loop: at most this many jobs claimed and not acked, fetched up to this many at once. */
export const HTTP_FETCH_BATCH = 16;
/** Worker loops at once, each with HTTP_FETCH_BATCH slots. */
export const HTTP_WORKERS = 4;
const TOKEN = 'bench-http-relay-token-0123456789abcdef';
const MEDIA = 'application/openjobspec+json';

/**
 * A relay through HTTP workers (docs/http-binding.md) against a native relay, both with job
 * tracking on (the binding's ack answers wait for the job store): `stagecoach admin` runs in a
 * process of its own; HTTP_WORKERS worker loops in this process, HTTP_FETCH_BATCH slots each, fetch jobs from
 * `http_a` (tenant `bench`) and ack each with an emit to `http_b`, which the server confirms
 * downstream before it acknowledges the input (as `ctx.emit`). The native side relays `js_a` ->
 * `js_b` (stage `js_ab`, tracking on). Reported: jobs/s of each, and the CPU per job of the
 * server (the admin process, from /proc) against the native stage's process; no target.
 */
export async function benchHttpRelay(ctx: BenchContext): Promise<ThroughputResult[]> {
  // HTTP is a round trip per ack: a tenth of --jobs keeps a round in the tens of seconds.
  const n = Math.max(1000, Math.round(ctx.opts.jobs / 10));
  progress(
    `http: ${fmt(n)} jobs per round, a relay through ${HTTP_WORKERS} HTTP workers of ${HTTP_FETCH_BATCH} slots vs a native relay, tracking on`,
  );
  const [ha, hb, ja, jb] = [physical(ctx, 'http_a'), physical(ctx, 'http_b'), physical(ctx, 'js_a'), physical(ctx, 'js_b')];
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-http-'));
  const file = path.join(dir, 'stagecoach.json');
  await writeFile(file, JSON.stringify({ ...ctx.raw, stages: {}, tracking: undefined }));
  const server: ChildProcess & { out?: string } = spawn(
    process.execPath,
    [path.join(HERE, '../../bin/stagecoach.js'), 'admin', '--config', file, '--host', '127.0.0.1', '--port', '0'],
    { env: { ...process.env, LOG_LEVEL: 'warn', STAGECOACH_ADMIN_TOKEN: TOKEN }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  server.out = '';
  server.stdout?.on('data', (chunk: Buffer) => (server.out += chunk.toString()));
  const native: Round[] = [];
  const http: Round[] = [];
  try {
    const base = await withTimeout(
      (async () => {
        for (;;) {
          const url = /OJS HTTP binding on (http:\/\/[^/]+)\//.exec(server.out ?? '')?.[1];
          if (url !== undefined) return url;
          await sleep(50);
        }
      })(),
      30_000,
      'the admin server listening',
    );
    for (let r = 1; r <= ctx.opts.rounds; r++) {
      progress(`  round ${r}/${ctx.opts.rounds}`);
      await fill(ctx, 'js_a', n);
      native.push({ ...(await stagecoachRound(ctx, ['js_ab'], n, `http round ${r} (native)`)), side: 'baseline' });
      await expectCounts(ctx.opts.url, { [ja]: 0, [jb]: n }, `http round ${r} (native)`);
      await purgeQueues(ctx.opts.url, [jb]);
      await sleep(SETTLE_MS);
      await fill(ctx, 'http_a', n);
      http.push(await httpRound(ctx, base, server.pid as number, n, `http round ${r} (HTTP workers)`));
      await expectCounts(ctx.opts.url, { [ha]: 0, [hb]: n }, `http round ${r} (HTTP workers)`);
      await purgeQueues(ctx.opts.url, [hb]);
      await sleep(SETTLE_MS);
    }
  } finally {
    await stopProcess(server, 'the admin server');
    await purgeQueues(ctx.opts.url, [ha, hb, ja, jb]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
  return [
    summarise(
      'http',
      `relay through HTTP workers, ${HTTP_WORKERS} workers of ${HTTP_FETCH_BATCH} slots (stagecoach column; its CPU is the server's, the admin process) vs a native relay (baseline column), tracking on for both; ratio HTTP / native`,
      [...native, ...http],
    ),
  ];
}

/** One round of the HTTP relay: until `n` jobs are acked; the CPU is the server process's. */
async function httpRound(ctx: BenchContext, base: string, pid: number, n: number, what: string): Promise<Round> {
  // node:http on a keep-alive agent, as a lean worker client would be: the workers share the
  // machine with the server here, and fetch() costs several times the CPU per request.
  const agent = new http.Agent({ keepAlive: true, maxSockets: HTTP_WORKERS * HTTP_FETCH_BATCH });
  const post = (route: string, body: unknown): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const payload = Buffer.from(JSON.stringify(body));
      const request = http.request(
        `${base}${route}`,
        {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${TOKEN}`,
            'content-type': MEDIA,
            'content-length': payload.length,
            accept: MEDIA,
            'x-ojs-tenant': TENANT,
          },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if ((response.statusCode ?? 0) >= 300) reject(new Error(`${what}: ${route} answered ${response.statusCode} ${text}`));
            else resolve(JSON.parse(text) as Record<string, unknown>);
          });
        },
      );
      request.on('error', reject);
      request.end(payload);
    });
  let claimed = 0;
  const startCpu = serverCpuUs(pid);
  const startBroker = brokerCpuNow();
  const startWorkers = process.cpuUsage();
  const started = performance.now();
  // Each loop works as an OJS worker with HTTP_FETCH_BATCH slots does (the SDK's OJSWorker): a
  // job's slot is free once its ack is answered, and the loop fetches for its free slots while
  // the others' acks are out, rather than waiting for its whole batch. It refills once half its
  // slots are free (one fetch per few jobs, not per job), and stops once the round's jobs are claimed.
  const worker = async (): Promise<void> => {
    const acks = new Set<Promise<void>>();
    for (;;) {
      const want = Math.min(HTTP_FETCH_BATCH - acks.size, n - claimed);
      if (want <= 0) break;
      const { jobs } = (await post('/ojs/v1/workers/fetch', { queues: ['http_a'], count: want, wait_ms: 1000 })) as {
        jobs: Array<{ id: string; args: unknown[] }>;
      };
      claimed += jobs.length;
      for (const job of jobs) {
        const ack = post('/ojs/v1/workers/ack', { job_id: job.id, emit: [{ queue: 'http_b', type: JOB_TYPE, args: job.args }] }).then(
          () => void acks.delete(ack),
        );
        acks.add(ack);
      }
      while (acks.size > HTTP_FETCH_BATCH / 2) await Promise.race(acks);
    }
    await Promise.all(acks);
  };
  try {
    await withTimeout(Promise.all(Array.from({ length: HTTP_WORKERS }, worker)), ctx.opts.roundTimeoutMs * 4, what);
  } finally {
    agent.destroy();
  }
  const seconds = (performance.now() - started) / 1000;
  const cpuUsPerJob = (serverCpuUs(pid) - startCpu) / n;
  const workers = process.cpuUsage(startWorkers);
  const endBroker = brokerCpuNow();
  const brokerCpuUsPerJob = startBroker === undefined || endBroker === undefined ? undefined : (endBroker - startBroker) / n;
  // The workers run in this process: their CPU is this process's (the bench's own share is small).
  progress(
    `    ${'http'.padEnd(10)} ${fmt(n)} jobs in ${seconds.toFixed(2)} s = ${fmt(n / seconds).padStart(6)} jobs/s, server CPU ${cpuUsPerJob.toFixed(0)} µs/job, workers ${((workers.user + workers.system) / n).toFixed(0)} µs/job${brokerCpuUsPerJob === undefined ? '' : `, broker CPU ${brokerCpuUsPerJob.toFixed(0)} µs/job`}`,
  );
  return {
    side: 'stagecoach',
    jobs: n,
    seconds,
    jobsPerSecond: n / seconds,
    cpuUsPerJob,
    ...(brokerCpuUsPerJob === undefined ? {} : { brokerCpuUsPerJob }),
    windowUs: [0, 0],
  };
}

/** User + system CPU of a process on this machine, µs (/proc/<pid>/stat, in clock ticks of 10 ms). */
function serverCpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  // After the command: state is field 3, so utime (14) and stime (15) are at 11 and 12 here.
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}
