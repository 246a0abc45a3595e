import { Tracker } from '../src/tracker/tracker.js';
import { Publisher } from '../src/publisher/publisher.js';
import { StageGroup } from '../src/runner/stage-group.js';
import { WorkflowAdvancer } from '../src/workflow/workflow-advancer.js';
import { chain, group } from '../src/workflow/workflow-spec.js';
import type { WorkflowSpec } from '../src/job/workflow.types.js';
import {
  alternatingRounds,
  asSide,
  fmt,
  markNow,
  progress,
  round,
  summarise,
  TENANT,
  withTimeout,
  type BenchContext,
  type Round,
  type ThroughputResult,
} from './common.js';

/** Polls `done()` every millisecond until it holds, within the round timeout. */
async function until(ctx: BenchContext, what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + ctx.opts.roundTimeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: stalled`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/**
 * What a workflow costs (docs/workflows.md): a chain of N steps and a group of N jobs, each job a
 * trivial handler, from the workflow's start to its end as the tracker folds it, against the
 * same N jobs published alone (no workflow, no batch), all at once, until the stage completed
 * them; and the chain against the N jobs published one after another by the client, each once the
 * one before completed (a hand-made chain). One stage process, one tracker holding the workflow
 * lock (no job store), one publisher, in this process; rounds alternated, medians reported.
 *
 * A chain is sequential by definition: its cost per step is a settlement report folded by the
 * tracker, then a transaction publishing the next step. The group shows what a workflow adds to
 * work that runs at once: its record, and every job reported.
 */
export async function benchWorkflows(ctx: BenchContext): Promise<ThroughputResult[]> {
  const n = ctx.opts.workflowSteps;
  const stage = ctx.stages.get('wf_step');
  if (stage === undefined) throw new Error('bench stage wf_step not loaded');
  progress(`workflows: a chain and a group of ${fmt(n)} trivial steps vs ${fmt(n)} jobs published alone, ${ctx.opts.rounds} rounds`);
  const stages = new StageGroup(ctx.config, [{ stage, tenant: TENANT }], ctx.log);
  let tracker: Tracker | undefined;
  let publisher: Publisher | undefined;
  const sides = { alone: [] as Round[], oneByOne: [] as Round[], chain: [] as Round[], group: [] as Round[] };
  try {
    await withTimeout(stages.start(false), 60_000, 'workflows: starting the stage');
    const runner = stages.runners[0];
    if (runner === undefined) throw new Error('workflows: no runner');
    const completed = (): number => runner.stats.completed;
    tracker = await Tracker.start(ctx.config, {
      log: ctx.log,
      announce: false,
      jobs: false,
      plugins: [WorkflowAdvancer.plugin({ config: ctx.config, log: ctx.log })],
    });
    const advancer = tracker.plugins[0] as WorkflowAdvancer;
    await until(ctx, 'workflows: the lock', () => advancer.advancing);
    publisher = await Publisher.connect(ctx.config, { log: ctx.log });
    const pub = publisher;
    const step = { queue: 'wf_steps', type: 'wf.step', args: [] };
    const steps = Array.from({ length: n }, () => step);
    const alone = async (r: number): Promise<void> => {
      const before = completed();
      const start = markNow();
      await Promise.all(steps.map(() => pub.publish('wf_steps', { type: 'wf.step', args: [], tenant: TENANT })));
      await until(ctx, `workflows round ${r} (alone)`, () => completed() >= before + n);
      sides.alone.push(round('baseline', n, start, markNow()));
    };
    const oneByOne = async (r: number): Promise<void> => {
      const start = markNow();
      for (let i = 0; i < n; i++) {
        const before = completed();
        await pub.publish('wf_steps', { type: 'wf.step', args: [], tenant: TENANT });
        await until(ctx, `workflows round ${r} (one by one)`, () => completed() > before);
      }
      sides.oneByOne.push(round('baseline', n, start, markNow()));
    };
    const workflow =
      (kind: 'chain' | 'group', spec: WorkflowSpec) =>
      async (r: number): Promise<void> => {
        const start = markNow();
        const id = await pub.workflow(spec, { tenant: TENANT });
        await until(ctx, `workflows round ${r} (${kind})`, () => advancer.workflows.evaluate(id)?.state === 'completed');
        sides[kind].push(round('stagecoach', n, start, markNow()));
      };
    const runChain = workflow('chain', chain(...steps));
    const runGroup = workflow('group', group(...steps));
    await alternatingRounds(ctx.opts.rounds, async (r) => {
      await oneByOne(r);
      await runGroup(r);
      return [() => alone(r), () => runChain(r)];
    });
  } finally {
    await publisher?.close().catch(() => undefined);
    await tracker?.close().catch(() => undefined);
    await withTimeout(stages.stop(), 60_000, 'workflows: stopping the stage').catch((err: Error) => progress(`  warning: ${err.message}`));
  }
  return [
    summarise(
      'workflow chain',
      `a chain of ${n} steps (stagecoach column) vs the ${n} jobs published alone at once (baseline); ratio chain / alone`,
      [...sides.alone, ...sides.chain],
    ),
    summarise('workflow chain (vs client)', `the chain vs the ${n} jobs published one after another, each once the one before completed`, [
      ...sides.oneByOne,
      ...asSide(sides.chain, 'stagecoach'),
    ]),
    summarise('workflow group', `a group of ${n} (stagecoach column) vs the ${n} jobs published alone at once (baseline)`, [
      ...asSide(sides.alone, 'baseline'),
      ...sides.group,
    ]),
  ];
}
