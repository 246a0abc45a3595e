/**
 * Child process of the pooled scenario's memory part: one pooled stage process (what
 * `stagecoach run <stage> --tenants ...` runs) serving the given tenants, all idle. It starts the
 * group (which declares every tenant's topology), waits until every tenant consumes, lets it
 * settle, collects garbage when run with --expose-gc, and reports over IPC; then it reports
 * process.memoryUsage() every 250 ms until the parent sends 'stop'.
 *
 * Input: env BENCH_POOLED_CHILD = JSON { raw, source, stage, tenants, settleMs }.
 */
import { compileConfig, createLogger, loadStage, StageGroup, type RawConfig } from '../src/index.js';

interface ChildInput {
  raw: RawConfig;
  source: string;
  stage: string;
  tenants: string[];
  settleMs: number;
}

const input = JSON.parse(process.env.BENCH_POOLED_CHILD ?? 'null') as ChildInput | null;
if (!input || typeof process.send !== 'function') {
  process.stderr.write('pooled-child: run by the benchmark only (needs BENCH_POOLED_CHILD and an IPC channel)\n');
  process.exit(2);
}
const send = (message: Record<string, unknown>): void => {
  if (process.connected) process.send?.(message);
};
process.on('disconnect', () => process.exit(1));

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const collect = (globalThis as { gc?: () => void }).gc;

const config = compileConfig(input.raw, input.source);
const log = createLogger({ component: 'bench-pooled-child' }, process.env.LOG_LEVEL ?? 'warn');
const stage = await loadStage(config, input.stage);
const group = new StageGroup(
  config,
  input.tenants.map((tenant) => ({ stage, tenant })),
  log,
  { pooled: { stage } },
);
void group.failed.then((err) => {
  send({ kind: 'error', message: err.message });
  process.exit(1);
});

let stopping = false;
process.on('message', (message) => {
  if (message !== 'stop' || stopping) return;
  stopping = true;
  void (async () => {
    await group.stop();
    send({ kind: 'stopped' });
    process.exit(0);
  })();
});

const started = performance.now();
await group.start();
const deadline = Date.now() + 120_000;
while (!group.readiness().ready) {
  if (Date.now() > deadline) {
    send({ kind: 'error', message: `not consuming 120 s after start: ${group.readiness().reason ?? ''}` });
    process.exit(1);
  }
  await sleep(50);
}
const startSeconds = (performance.now() - started) / 1000;
await sleep(input.settleMs);
if (collect) {
  collect();
  await sleep(200);
  collect();
}
send({ kind: 'ready', startSeconds, gc: collect !== undefined, channels: group.pool?.channels ?? 0, ...process.memoryUsage() });
setInterval(() => send({ kind: 'sample', ...process.memoryUsage() }), 250);
