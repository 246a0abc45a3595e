/**
 * Child process of the pooled scenario's memory part: one pooled stage process (what
 * `stagecoach run <stage> --tenants ...` runs) serving the given tenants, all idle. It starts the
 * group (which declares every tenant's topology), waits until every tenant consumes, lets it
 * settle, collects garbage when run with --expose-gc, and reports over IPC; then it reports
 * process.memoryUsage() every 250 ms until the parent sends 'stop' (bench/child-harness.ts).
 *
 * With `follow` it is what `stagecoach run <stage> --all-tenants` runs: `tenants` is empty and it
 * serves every tenant configured or provisioned on the broker (bench/tenants.ts).
 *
 * Input: env BENCH_POOLED_CHILD = JSON { raw, source, stage, tenants, settleMs, follow?, readyTimeoutMs? }.
 */
import { loadStage, StageGroup } from '../src/index.js';
import { reportMemory, startChild, superviseGroup, waitFor, type ChildInputBase } from './child-harness.js';

interface ChildInput extends ChildInputBase {
  stage: string;
  tenants: string[];
  settleMs: number;
  follow?: boolean;
  /** @defaultValue 120 s */
  readyTimeoutMs?: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const collect = (globalThis as { gc?: () => void }).gc;

const child = startChild<ChildInput>('pooled-child', 'BENCH_POOLED_CHILD');
const { input, config, log } = child;
const stage = await loadStage(config, input.stage);
const group = new StageGroup(
  config,
  input.tenants.map((tenant) => ({ stage, tenant })),
  log,
  input.follow === true ? { knownTenantsOnly: true, pooled: { stage, follow: true } } : { pooled: { stage } },
);
superviseGroup(child, group);

const started = performance.now();
await group.start();
const readyTimeoutMs = input.readyTimeoutMs ?? 120_000;
await waitFor(
  child,
  () => group.readiness().ready,
  readyTimeoutMs,
  50,
  () => `not consuming ${readyTimeoutMs / 1000} s after start: ${group.readiness().reason ?? ''}`,
);
const startSeconds = (performance.now() - started) / 1000;
// performance.now() counts from the process's start: module loading and connecting included.
const processSeconds = performance.now() / 1000;
const served = group.tenants.length;
await sleep(input.settleMs);
if (collect) {
  collect();
  await sleep(200);
  collect();
}
reportMemory(child, { startSeconds, processSeconds, served, gc: collect !== undefined, channels: group.pool?.channels ?? 0 });
