import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Tracker } from '../../src/tracker/tracker.js';
import type { CompiledConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import type { Evaluation } from '../../src/workflow/workflow-eval.js';
import { WorkflowAdvancer } from '../../src/workflow/workflow-advancer.js';
import { stepJobId, workflowCallbackId } from '../../src/workflow/workflow-plan.js';
import { batch, chain, group } from '../../src/workflow/workflow-spec.js';
import { runs, type StepArgs } from '../fixtures/workflow-stages.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';
import { EventTap } from '../helpers/event-tap.js';
import { payloadOffloaderFor, type PayloadOffloader } from '../../src/payload/payload-offloader.js';

const log = createLogger({ test: 'workflows' }, 'error');
const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/config.json');

export function workflowConfig(extra: { payload_threshold?: number; payload_dir?: string; threads?: number } = {}): CompiledConfig {
  return withTestConfig(
    {
      tenants: ['acme'],
      ...(extra.payload_threshold === undefined
        ? {}
        : { payloads: { threshold: extra.payload_threshold, store: { kind: 'fs', dir: extra.payload_dir ?? './payloads' } } }),
      queues: { _default: { default_retry: { max_attempts: 2, initial_interval: 'PT1S' } } },
      stages: {
        steps: { module: './workflow-stages.js', concurrency: 4, ...(extra.threads === undefined ? {} : { threads: extra.threads }) },
        leaves: { module: './workflow-stages.js', concurrency: 4 },
      },
    },
    FIXTURES,
  );
}

const step = (type: string, args: StepArgs = {}) => ({ queue: 'steps', type, args: [args] });

describe('workflows (OJS chain, group, batch)', function () {
  this.timeout(60_000);
  let running: RunningGroup | undefined;
  let tracker: Tracker | undefined;
  let advancer: WorkflowAdvancer | undefined;
  let tap: EventTap | undefined;

  before(async () => {
    const config = workflowConfig();
    tap = await EventTap.open(config.broker.url, `${config.prefix}.events`);
    running = await startGroup(
      config,
      [
        { stage: 'steps', tenant: 'acme' },
        { stage: 'leaves', tenant: 'acme' },
      ],
      log,
    );
    tracker = await Tracker.start(config, { log, plugins: [WorkflowAdvancer.plugin({ config, log })] });
    advancer = tracker.plugins[0] as WorkflowAdvancer;
    await waitFor('the workflow lock taken', () => advancer!.advancing);
  });

  after(async () => {
    await tracker?.close();
    await tap?.close();
    await running?.stop();
  });

  async function ended(id: string): Promise<Evaluation> {
    return waitFor(
      `workflow ${id} ended`,
      async () => {
        await tracker!.sync();
        const evaluation = advancer!.workflows.evaluate(id);
        return evaluation !== undefined && ['completed', 'failed', 'cancelled'].includes(evaluation.state) ? evaluation : undefined;
      },
      30_000,
    );
  }

  const ran = (id: string) => runs.steps.filter((run) => run.id === id);

  it('runs a chain step by step, each given the result of the one before, every step once', async () => {
    const id = await running!.publisher.workflow(chain(step('a', { result: { n: 1 } }), step('b'), step('c')), { tenant: 'acme' });
    const done = await ended(id);
    expect(done.state).to.equal('completed');
    const [a, b, c] = ['0', '1', '2'].map((p) => ran(stepJobId(id, p)));
    expect([a, b, c].map((r) => r.length)).to.deep.equal([1, 1, 1]);
    expect(a![0]?.parent_results).to.deep.equal([]);
    expect(b![0]?.parent_results).to.deep.equal([{ n: 1 }]);
    expect(c![0]?.parent_results).to.deep.equal([{ step: 'b', parents: [{ n: 1 }] }]);
    expect(b![0]?.workflow).to.deep.equal({ id, step: '1' });
    expect(tracker!.batch(id)?.counts).to.include({ known: 3, completed: 3, in_flight: 0 });
    // The lock holder told of it: started, then completed, once each.
    const completed = await tap!.next('workflow.completed', (event) => event.subject === id);
    expect(completed.event.data).to.include({ workflow_id: id, workflow_type: 'chain', tenant: 'acme', state: 'completed' });
    expect(tap!.of('workflow.started', (event) => event.subject === id)).to.have.length(1);
    expect(tap!.of('workflow.completed', (event) => event.subject === id)).to.have.length(1);
  });

  it('ends a chain at a failed step and cancels the rest; a step waits for what it emitted', async () => {
    const id = await running!.publisher.workflow(
      chain(step('fan', { leaves: 3, leaf_ms: 200 }), step('boom', { fail: true }), step('never')),
      { tenant: 'acme' },
    );
    const done = await ended(id);
    expect(done.state).to.equal('failed');
    expect(done.root.children.map((child) => child.state)).to.deep.equal(['completed', 'failed', 'cancelled']);
    expect(done.root.children[0]?.counts).to.include({ known: 4, completed: 4 });
    expect(ran(stepJobId(id, '2'))).to.have.length(0);
    // The failing step ran after every leaf of the one before had ended.
    const boom = runs.steps.findIndex((run) => run.id === stepJobId(id, '1'));
    expect(boom).to.be.greaterThan(-1);
    expect(tracker!.batch(id)?.counts).to.include({ known: 6, completed: 4, dead: 1, cancelled: 1, in_flight: 0 });
  });

  it("runs a batch's callbacks with every member's outcome, the failure included", async () => {
    const id = await running!.publisher.workflow(
      chain(
        batch([step('ok', { result: 'fine' }), step('bad', { fail: true }), group(step('g1'), step('g2'))], {
          on_complete: step('report'),
          on_success: step('cheer'),
          on_failure: step('alert'),
        }),
        step('after'),
      ),
      { tenant: 'acme' },
    );
    const done = await ended(id);
    expect(done.state).to.equal('completed');
    expect(ran(workflowCallbackId(id, '0', 'on_success'))).to.have.length(0);
    const [report] = ran(workflowCallbackId(id, '0', 'on_complete'));
    expect(report?.parent_results?.[0]).to.equal('fine');
    expect(report?.parent_results?.[1]).to.equal(null);
    const outcomes = (report?.workflow as { outcomes: Array<{ state: string }> }).outcomes;
    expect(outcomes.map((o) => o.state)).to.deep.equal(['completed', 'failed', 'completed']);
    expect(ran(workflowCallbackId(id, '0', 'on_failure'))).to.have.length(1);
    expect(ran(stepJobId(id, '1'))).to.have.length(1);
    await tap!.next('workflow.completed', (event) => event.subject === id);
    const fired = tap!.of('workflow.callback_fired', (event) => event.subject === id).map((e) => e.event.data.callback);
    expect(fired).to.have.members(['on_complete', 'on_failure']);
  });

  it('starts a workflow from a handler (ctx.emit), in its tenant, once', async () => {
    const inner = chain(step('inner-1'), step('inner-2'));
    const outer = await running!.publisher.workflow(chain(step('starter', { workflow: inner })), { tenant: 'acme' });
    await ended(outer);
    const starter = ran(stepJobId(outer, '0'))[0]!;
    const started = [...advancer!.workflows.workflows.values()].find((w) => w.parent === starter.id);
    expect(started?.tenant).to.equal('acme');
    const done = await ended(started!.id);
    expect(done.state).to.equal('completed');
    expect(ran(stepJobId(started!.id, '1'))).to.have.length(1);
  });
});

describe('workflows from a handler in a worker thread, and results by reference', function () {
  this.timeout(60_000);
  let running: RunningGroup | undefined;
  let tracker: Tracker | undefined;
  let advancer: WorkflowAdvancer | undefined;
  let payloadDir: string | undefined;
  let payloads: PayloadOffloader | undefined;

  before(async () => {
    // A small payload threshold: a step's parent_results above it go by reference.
    payloadDir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-workflow-payloads-'));
    const config = workflowConfig({ threads: 1, payload_threshold: 2048, payload_dir: payloadDir });
    payloads = payloadOffloaderFor(config, log);
    running = await startGroup(config, [{ stage: 'steps', tenant: 'acme' }], log);
    tracker = await Tracker.start(config, {
      log,
      plugins: [WorkflowAdvancer.plugin({ config, log, payloads })],
    });
    advancer = tracker.plugins[0] as WorkflowAdvancer;
    await waitFor('the workflow lock taken', () => advancer!.advancing);
  });

  after(async () => {
    await tracker?.close();
    await running?.stop();
    await payloads?.store.close();
    if (payloadDir !== undefined) await rm(payloadDir, { recursive: true, force: true });
  });

  const ended = (id: string) =>
    waitFor(
      `workflow ${id} ended`,
      async () => {
        await tracker!.sync();
        const now = advancer!.workflows.evaluate(id);
        return now !== undefined && ['completed', 'failed', 'cancelled'].includes(now.state) ? now : undefined;
      },
      30_000,
    );

  it('starts a workflow from a threaded handler, and hands a large result on by reference', async () => {
    const big = 'x'.repeat(4096);
    expect(await payloads!.store.count('acme')).to.equal(0);
    const inner = chain(step('inner-1', { result: { big } }), step('inner-2'));
    const outer = await running!.publisher.workflow(chain(step('starter', { workflow: inner })), { tenant: 'acme' });
    expect((await ended(outer)).state).to.equal('completed');
    const starter = stepJobId(outer, '0');
    const started = [...advancer!.workflows.workflows.values()].find((w) => w.parent === starter);
    expect(started, 'the workflow the threaded handler started').to.not.equal(undefined);
    const done = await ended(started!.id);
    expect(done.state).to.equal('completed');
    // inner-2 returned what it was given: the 4 KiB result, which travelled by reference (and stays for the sweep).
    expect(done.root.children[1]?.result).to.deep.equal({ step: 'inner-2', parents: [{ big }] });
    expect(await payloads!.store.count('acme')).to.equal(1);
  });
});
