import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { Tracker } from '../../src/tracker/tracker.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import type { Evaluation } from '../../src/workflow/workflow-eval.js';
import { WorkflowAdvancer } from '../../src/workflow/workflow-advancer.js';
import { stepJobId, workflowCallbackId } from '../../src/workflow/workflow-plan.js';
import { batch, chain } from '../../src/workflow/workflow-spec.js';
import type { StepArgs, StepRun } from '../fixtures/workflow-stages.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { Supervisor } from '../helpers/supervisor.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'workflows-faults' }, 'error');
const TENANT = 'acme';
const STAGES: StageMetadata[] = [
  { name: 'steps', input: 'steps', outputs: ['steps', 'leaves'] },
  { name: 'leaves', input: 'leaves', outputs: [] },
];
const step = (type: string, args: StepArgs = {}) => ({ queue: 'steps', type, args: [args] });

/**
 * Workflows under SIGKILL (docs/workflows.md, "What holds"): the stages and two trackers run as
 * `stagecoach` processes, restarted when they die (Supervisor), every handler run journaled to a
 * file. A chain of three and a batch of five (a group with a callback) in a chain are run while
 * the stage processes and the tracker holding the workflow lock are killed at chosen points: the
 * step stage between steps (a step in hand would run again, as any job does), the leaf stage with
 * leaves in hand, the lock holder right after it published a step. Every step and callback must
 * run exactly once, and the workflow end as an undisturbed one does.
 */
describe('workflows under faults (SIGKILLed stages and trackers)', function () {
  this.timeout(180_000);
  let project: ConfigFile | undefined;
  let supervisor: Supervisor | undefined;
  let publisher: Publisher | undefined;
  let observer: Tracker | undefined;
  let journal: string | undefined;

  before(async () => {
    const module = path.join(REPO_ROOT, 'dist/test/fixtures/workflow-stages.js');
    project = await writeConfigFile(
      {
        tenants: [TENANT],
        queues: { _default: { default_retry: { max_attempts: 3, initial_interval: 'PT1S' } } },
        stages: { steps: { module, concurrency: 4 }, leaves: { module, concurrency: 2 } },
      },
      STAGES,
      'workflows-faults',
    );
    journal = path.join(project.dir, 'journal.jsonl');
    // Restarted after 1.5 s: a process killed stays away long enough for work to go on without it.
    const sup = (supervisor = new Supervisor(1500));
    const env = { STAGECOACH_HTTP_PORT: '0', LOG_LEVEL: 'info', WORKFLOW_JOURNAL: journal };
    sup.add('steps', ['run', 'steps', '--tenant', TENANT, '--config', project.file], env);
    sup.add('leaves', ['run', 'leaves', '--tenant', TENANT, '--config', project.file], env);
    // Two trackers fold the stream at once; one holds the workflow lock.
    sup.add('tracker-1', ['tracker', '--config', project.file], env);
    sup.add('tracker-2', ['tracker', '--config', project.file], env);
    await waitFor(
      'the stages consuming and the trackers caught up',
      () =>
        ['steps', 'leaves'].every((name) => sup.stderr(name).includes('"stage consuming"')) &&
        ['tracker-1', 'tracker-2'].every((name) => sup.stderr(name).includes('"tracker caught up"')),
      60_000,
    );
    publisher = await Publisher.connect(project.config, { log });
    // Reads the stream as the trackers do, never takes the lock: what the test looks at.
    observer = await Tracker.start(project.config, {
      log,
      announce: false,
      plugins: [WorkflowAdvancer.plugin({ config: project.config, log, advance: false })],
    });
  });

  after(async () => {
    await observer?.close();
    await publisher?.close();
    await supervisor?.stopAll().catch(() => undefined);
    await project?.remove().catch(() => undefined);
    if (project) await rm(project.dir, { recursive: true, force: true });
  });

  const workflows = (): WorkflowAdvancer => observer!.plugins[0] as WorkflowAdvancer;

  async function evaluation(id: string): Promise<Evaluation | undefined> {
    await observer!.sync();
    return workflows().workflows.evaluate(id);
  }

  async function runs(): Promise<Array<StepRun & { kind: string }>> {
    const text = await readFile(journal as string, 'utf8').catch(() => '');
    return text
      .split('\n')
      .filter((line) => line.length > 0)
      .map((line) => JSON.parse(line) as StepRun & { kind: string });
  }

  /** Which tracker process holds the workflow lock now. */
  function holder(): string {
    const holders = ['tracker-1', 'tracker-2'].filter((name) => {
      const err = supervisor!.stderr(name);
      return supervisor!.alive(name) && err.includes('"workflow lock taken');
    });
    if (holders.length !== 1) throw new Error(`expected one tracker holding the workflow lock, found ${holders.join(', ') || 'none'}`);
    return holders[0] as string;
  }

  /** Waits until the job `id` was reported created (published by the lock holder). */
  const published = (id: string) =>
    waitFor(
      `job ${id} published`,
      async () => {
        await observer!.sync();
        return observer!.fold.job(id)?.created === true;
      },
      60_000,
    );

  /** Waits until the job `id` reported its own final outcome (its handler returned and it was acknowledged or is about to be). */
  const settled = (id: string) =>
    waitFor(
      `job ${id} settled`,
      async () => {
        await observer!.sync();
        return observer!.fold.job(id)?.final !== undefined;
      },
      60_000,
    );

  const ended = (id: string) =>
    waitFor(
      `workflow ${id} ended`,
      async () => {
        const now = await evaluation(id);
        return now !== undefined && ['completed', 'failed', 'cancelled'].includes(now.state) ? now : undefined;
      },
      120_000,
    );

  it('a chain of three: the step stage killed between steps, the leaf stage with leaves in hand, the lock holder right after it published a step; every step runs once', async () => {
    const id = await publisher!.workflow(chain(step('c0', { leaves: 4, leaf_ms: 400 }), step('c1', { sleep_ms: 200 }), step('c2')), {
      tenant: TENANT,
    });
    const [c0, c1, c2] = ['0', '1', '2'].map((p) => stepJobId(id, p)) as [string, string, string];
    // c0 returned (its leaves run on): the step stage has nothing of the workflow in hand.
    await settled(c0);
    supervisor!.kill('steps');
    // A leaf in hand is run again by the next leaf process: real work, not a step.
    await waitFor('a leaf started', async () => (await runs()).some((run) => run.kind === 'leaf'));
    supervisor!.kill('leaves');
    // The lock holder publishes c1 once c0's leaves ended, then dies before anything else.
    const first = holder();
    await published(c1);
    supervisor!.kill(first);
    const done = await ended(id);
    expect(done.state).to.equal('completed');
    const all = await runs();
    for (const job of [c0, c1, c2])
      expect(
        all.filter((run) => run.id === job),
        `runs of ${job}`,
      ).to.have.length(1);
    expect(all.find((run) => run.id === c2)?.parent_results).to.deep.equal([{ step: 'c1', parents: [{ step: 'c0', parents: [] }] }]);
    // Each leaf ran at least once; the batch knows every job once: 3 steps and 4 leaves.
    expect(observer!.batch(id)?.counts).to.include({ completed: 7, failed: 0, in_flight: 0 });
    expect(supervisor!.exits.filter((exit) => exit.killed).map((exit) => exit.name)).to.include.members(['steps', 'leaves', first]);
  });

  it('a batch of five and the step after it: the lock holder killed while the five ran, the step stage between them and the callback; every step runs once', async () => {
    const members = [0, 1, 2, 3, 4].map((i) => step(`g${i}`, { leaves: 1, leaf_ms: 300 }));
    const id = await publisher!.workflow(chain(batch(members, { on_complete: step('report') }), step('after')), { tenant: TENANT });
    const jobs = [0, 1, 2, 3, 4].map((i) => stepJobId(id, `0.${i}`));
    const report = workflowCallbackId(id, '0', 'on_complete');
    const after = stepJobId(id, '1');
    await Promise.all(jobs.map((job) => published(job)));
    // The holder published the five; it dies while they run, the other tracker takes over.
    const first = holder();
    supervisor!.kill(first);
    await Promise.all(jobs.map((job) => settled(job)));
    // Every member returned: the step stage dies with only leaves left, and the leaf stage with leaves in hand.
    supervisor!.kill('steps');
    supervisor!.kill('leaves');
    const done = await ended(id);
    expect(done.state).to.equal('completed');
    const all = await runs();
    for (const job of [...jobs, report, after])
      expect(
        all.filter((run) => run.id === job),
        `runs of ${job}`,
      ).to.have.length(1);
    const [reportRun] = all.filter((run) => run.id === report);
    expect(reportRun?.parent_results).to.have.length(5);
    expect((reportRun?.workflow as { outcomes: unknown[] }).outcomes).to.have.length(5);
    expect(observer!.batch(id)?.counts).to.include({ completed: 12, failed: 0, in_flight: 0 });
  });
});
