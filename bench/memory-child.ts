/**
 * Child process of the memory scenario: runs the `hold` stage (its handler holds every job
 * until told to stop) for the bench tenant, reports over IPC once it holds `expect` jobs, then
 * reports process.memoryUsage() every 250 ms until the parent sends 'stop'.
 *
 * Input: env BENCH_MEMORY_CHILD = JSON { raw, source, expect }.
 */
import { compileConfig, createLogger, loadStage, StageGroup, type RawConfig } from '../src/index.js';
import { probe } from './bench-stages.js';

interface ChildInput {
  raw: RawConfig;
  source: string;
  tenant: string;
  expect: number;
}

const input = JSON.parse(process.env.BENCH_MEMORY_CHILD ?? 'null') as ChildInput | null;
if (!input || typeof process.send !== 'function') {
  process.stderr.write('memory-child: run by the benchmark only (needs BENCH_MEMORY_CHILD and an IPC channel)\n');
  process.exit(2);
}
const send = (message: Record<string, unknown>): void => {
  if (process.connected) process.send?.(message);
};
// The parent gone (killed, crashed): do not linger holding jobs.
process.on('disconnect', () => process.exit(1));

const config = compileConfig(input.raw, input.source);
const log = createLogger({ component: 'bench-memory-child' }, process.env.LOG_LEVEL ?? 'warn');
const stage = await loadStage(config, 'hold');
const group = new StageGroup(config, [{ stage, tenant: input.tenant }], log);
void group.failed.then((err) => {
  send({ kind: 'error', message: err.message });
  process.exit(1);
});

let stopping = false;
process.on('message', (message) => {
  if (message !== 'stop' || stopping) return;
  stopping = true;
  void (async () => {
    const stopped = group.stop();
    probe.releaseHold();
    await stopped;
    send({ kind: 'stopped' });
    process.exit(0);
  })();
});

await group.start(false);
const deadline = Date.now() + 60_000;
while (probe.held < input.expect) {
  if (Date.now() > deadline) {
    send({ kind: 'error', message: `holds ${probe.held} jobs after 60 s, expected ${input.expect}` });
    process.exit(1);
  }
  await new Promise((resolve) => setTimeout(resolve, 10));
}
send({ kind: 'ready', held: probe.held, ...process.memoryUsage() });
setInterval(() => send({ kind: 'sample', held: probe.held, ...process.memoryUsage() }), 250);
