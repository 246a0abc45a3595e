/**
 * Child process of the memory scenario: runs the `hold` stage (its handler holds every job
 * until told to stop) for the bench tenant, reports over IPC once it holds `expect` jobs, then
 * reports process.memoryUsage() every 250 ms until the parent sends 'stop' (bench/child-harness.ts).
 *
 * Input: env BENCH_MEMORY_CHILD = JSON { raw, source, tenant, expect }.
 */
import { loadStage, StageGroup } from '../src/index.js';
import { probe } from './bench-stages.js';
import { reportMemory, startChild, superviseGroup, waitFor, type ChildInputBase } from './child-harness.js';

interface ChildInput extends ChildInputBase {
  tenant: string;
  expect: number;
}

const child = startChild<ChildInput>('memory-child', 'BENCH_MEMORY_CHILD');
const { input, config, log } = child;
const stage = await loadStage(config, 'hold');
const group = new StageGroup(config, [{ stage, tenant: input.tenant }], log);
superviseGroup(child, group, async () => {
  const stopped = group.stop();
  probe.releaseHold();
  await stopped;
});

await group.start(false);
await waitFor(
  child,
  () => probe.held >= input.expect,
  60_000,
  10,
  () => `holds ${probe.held} jobs after 60 s, expected ${input.expect}`,
);
reportMemory(child, { held: probe.held }, () => ({ held: probe.held }));
