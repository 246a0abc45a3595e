import { expect } from 'chai';
import { BatchFold } from '../../src/batch/batch-fold.js';
import type { WorkflowSpec } from '../../src/job/workflow.types.js';
import type {
  CreatedReport,
  DirectiveRecord,
  SettledReport,
  TrackingRecord,
  WorkflowRecord,
} from '../../src/tracking-stream/tracking-report.js';
import type { Evaluation } from '../../src/workflow/workflow-eval.js';
import { WorkflowFold, workflowKey } from '../../src/workflow/workflow-fold.js';
import { jobNodes, planOf, stepJobId, workflowCallbackId } from '../../src/workflow/workflow-plan.js';
import { batch, chain, checkWorkflow, group } from '../../src/workflow/workflow-spec.js';

const at = '2026-01-01T00:00:00.000Z';
let n = 0;
const WF = '01900000-0000-7000-8000-000000000001';

const job = (type: string, queue = 'q') => ({ queue, type, args: [] });

/** A fold of one workflow, and the records written so far (the stream). */
class Stream {
  readonly log: TrackingRecord[] = [];
  readonly batches = new BatchFold();
  readonly workflows = new WorkflowFold(this.batches);

  constructor(spec: WorkflowSpec) {
    const definition = checkWorkflow(spec);
    const record: WorkflowRecord = {
      kind: 'workflow',
      id: `w${++n}`,
      workflow: WF,
      tenant: 'acme',
      definition,
      jobs: jobNodes(planOf(WF, definition)).map((node) => node.job as string),
      at,
    };
    this.append(record);
  }

  append(record: TrackingRecord): void {
    this.log.push(record);
    this.workflows.observe(record, this.batches.apply(record));
  }

  evaluation(): Evaluation {
    return this.workflows.evaluate(workflowKey({ id: WF, tenant: 'acme' })) as Evaluation;
  }

  /** What an advancer does: publishes (reports created) what is due, cancels what never runs. @returns the ids published. */
  advance(): string[] {
    const due = this.evaluation();
    for (const step of due.publish) this.append(created(step.node.job as string));
    for (const node of due.cancel) this.append(settled(node.job as string, 'cancelled'));
    return due.publish.map((step) => step.node.job as string);
  }
}

const created = (id: string): CreatedReport => ({ kind: 'created', id: `c${++n}`, job: id, batch: WF, tenant: 'acme', queue: 'q', at });
const settled = (id: string, outcome: SettledReport['outcome'], more: Partial<SettledReport> = {}): SettledReport => ({
  kind: 'settled',
  id: `r${++n}`,
  job: id,
  batch: WF,
  tenant: 'acme',
  stage: 's',
  queue: 'q',
  outcome,
  attempt: 1,
  at,
  ...more,
});
const step = (path: string): string => stepJobId(WF, path);

describe('workflow fold', () => {
  it('runs a chain one step at a time, each given the result of the one before', () => {
    const stream = new Stream(chain(job('a'), job('b'), job('c')));
    expect(stream.evaluation().state).to.equal('pending');
    expect(stream.evaluation().publish.map((due) => due.node.path)).to.deep.equal(['0']);
    expect(stream.evaluation().publish[0]?.parentResults).to.deep.equal([]);
    stream.advance();
    expect(stream.evaluation()).to.include({ state: 'running' });
    expect(stream.evaluation().publish).to.deep.equal([]);
    stream.append(settled(step('0'), 'completed', { result: { report_id: 'R-1' } }));
    const second = stream.evaluation().publish;
    expect(second.map((due) => due.node.path)).to.deep.equal(['1']);
    expect(second[0]?.parentResults).to.deep.equal([{ report_id: 'R-1' }]);
    stream.advance();
    stream.append(settled(step('1'), 'completed', { result: 2 }));
    expect(stream.evaluation().publish[0]?.parentResults).to.deep.equal([2]);
    stream.advance();
    stream.append(settled(step('2'), 'completed'));
    expect(stream.evaluation().state).to.equal('completed');
    expect(stream.batches.batch(WF)?.counts).to.include({ known: 3, completed: 3, in_flight: 0 });
  });

  it('stops a chain at a failed step: what follows is cancelled, the batch completes, the workflow failed', () => {
    const stream = new Stream(chain(job('a'), job('b'), job('c')));
    stream.advance();
    stream.append(settled(step('0'), 'completed'));
    stream.advance();
    stream.append(settled(step('1'), 'retrying', { next_attempt: 2 }));
    expect(stream.evaluation()).to.deep.include({ state: 'running', publish: [], cancel: [] });
    stream.append(settled(step('1'), 'dead', { attempt: 2, error: { type: 'HANDLER_ERROR', message: 'no' } }));
    const failed = stream.evaluation();
    expect(failed.state).to.equal('failed');
    expect(failed.publish).to.deep.equal([]);
    expect(failed.cancel.map((node) => node.path)).to.deep.equal(['2']);
    expect(failed.root.error).to.deep.equal({ type: 'HANDLER_ERROR', message: 'no' });
    stream.advance();
    expect(stream.evaluation().root.children.map((child) => child.state)).to.deep.equal(['completed', 'failed', 'cancelled']);
    expect(stream.batches.batch(WF)?.counts).to.include({ known: 3, completed: 1, dead: 1, cancelled: 1, in_flight: 0 });
  });

  it('waits for everything a step emitted before the next step runs', () => {
    const stream = new Stream(chain(job('scan'), job('report')));
    stream.advance();
    stream.append(settled(step('0'), 'completed', { emitted: ['child-1', 'child-2'] }));
    expect(stream.evaluation().publish).to.deep.equal([]);
    expect(stream.evaluation().root.children[0]?.state).to.equal('active');
    // A grandchild reported before its parent named it is counted once the parent does.
    stream.append(settled('grandchild', 'completed'));
    stream.append(settled('child-1', 'completed', { emitted: ['grandchild'] }));
    stream.append(settled('child-2', 'completed'));
    expect(stream.evaluation().root.children[0]?.counts).to.include({ known: 4, completed: 4, in_flight: 0 });
    expect(stream.evaluation().publish.map((due) => due.node.path)).to.deep.equal(['1']);
  });

  it('runs a group at once and fails it once every job ended with one failure', () => {
    const stream = new Stream(group(job('a'), job('b'), job('c')));
    expect(stream.advance()).to.deep.equal([step('0'), step('1'), step('2')]);
    stream.append(settled(step('1'), 'dead'));
    expect(stream.evaluation().state).to.equal('running');
    stream.append(settled(step('0'), 'completed'));
    stream.append(settled(step('2'), 'completed'));
    expect(stream.evaluation().state).to.equal('failed');
  });

  it("runs a batch's callbacks with every job's result and outcome, failures included, and none of the others", () => {
    const stream = new Stream(batch([job('a'), job('b')], { on_complete: job('done'), on_success: job('ok'), on_failure: job('bad') }));
    stream.advance();
    stream.append(settled(step('0'), 'completed', { result: { n: 1 } }));
    expect(stream.evaluation().publish).to.deep.equal([]);
    stream.append(settled(step('1'), 'dead', { error: { type: 'X', message: 'boom' } }));
    const due = stream.evaluation();
    expect(due.publish.map((d) => d.node.callback)).to.deep.equal(['on_complete', 'on_failure']);
    expect(due.publish[0]?.node.job).to.equal(workflowCallbackId(WF, '', 'on_complete'));
    expect(due.publish[0]?.parentResults).to.deep.equal([{ n: 1 }, null]);
    expect(due.publish[0]?.outcomes).to.deep.equal([
      { index: 0, state: 'completed', job_id: step('0'), result: { n: 1 } },
      { index: 1, state: 'failed', job_id: step('1'), error: { type: 'X', message: 'boom' } },
    ]);
    expect(due.cancel.map((node) => node.callback)).to.deep.equal(['on_success']);
    stream.advance();
    expect(stream.evaluation().state).to.equal('running');
    stream.append(settled(workflowCallbackId(WF, '', 'on_complete'), 'completed'));
    stream.append(settled(workflowCallbackId(WF, '', 'on_failure'), 'completed'));
    // OJS: a batch's state is its callbacks'.
    expect(stream.evaluation().state).to.equal('completed');
    expect(stream.batches.batch(WF)?.counts.in_flight).to.equal(0);
  });

  it('passes results through nesting: a group after a step gets its result, the step after the group all of theirs', () => {
    const stream = new Stream(chain(job('extract'), group(job('csv'), job('pdf')), job('load')));
    stream.advance();
    stream.append(settled(step('0'), 'completed', { result: 'raw' }));
    const fanOut = stream.evaluation().publish;
    expect(fanOut.map((due) => [due.node.path, due.parentResults])).to.deep.equal([
      ['1.0', ['raw']],
      ['1.1', ['raw']],
    ]);
    stream.advance();
    stream.append(settled(step('1.1'), 'completed', { result: 'b' }));
    stream.append(settled(step('1.0'), 'completed', { result: 'a' }));
    expect(stream.evaluation().publish.map((due) => [due.node.path, due.parentResults])).to.deep.equal([['2', ['a', 'b']]]);
  });

  it('cancels what has not started when the workflow is cancelled', () => {
    const stream = new Stream(chain(job('a'), group(job('b'), job('c'))));
    stream.advance();
    const cancel: DirectiveRecord = { kind: 'directive', id: `d${++n}`, action: 'cancel', batch: WF, tenant: 'acme', at };
    stream.append(cancel);
    const cancelled = stream.evaluation();
    expect(cancelled.state).to.equal('cancelled');
    expect(cancelled.publish).to.deep.equal([]);
    expect(cancelled.cancel.map((node) => node.path)).to.deep.equal(['1.0', '1.1']);
    stream.advance();
    // The step that was enqueued is met by its stage and discarded unrun.
    stream.append(settled(step('0'), 'cancelled'));
    expect(stream.batches.batch(WF)?.counts).to.include({ cancelled: 3, in_flight: 0 });
  });

  it('derives the same states and due jobs from a replay, duplicates and a second reader', () => {
    const stream = new Stream(chain(job('a'), batch([job('b'), chain(job('c'), job('d'))], { on_complete: job('e') }), job('f')));
    const results = new Map<string, unknown>();
    for (let round = 0; round < 20; round++) {
      const published = stream.advance();
      if (published.length === 0 && stream.evaluation().cancel.length === 0) {
        const open = jobNodes(stream.workflows.workflow(WF)!.plan).find((node) => {
          const job = stream.batches.jobs.get(node.job as string);
          return job?.created === true && job.final === undefined;
        });
        if (open === undefined) break;
        results.set(open.path, `r-${open.path}`);
        stream.append(settled(open.job as string, 'completed', { result: `r-${open.path}` }));
      }
    }
    expect(stream.evaluation().state).to.equal('completed');
    const creates = stream.log.filter((record) => record.kind === 'created').map((record) => (record as CreatedReport).job);
    expect(new Set(creates).size).to.equal(creates.length);
    expect(creates.length).to.equal(6);
    // Every record twice, in order, into fresh folds: nothing is due, the same states.
    const replay = new BatchFold();
    const workflows = new WorkflowFold(replay);
    for (const record of [...stream.log, ...stream.log]) workflows.observe(record, replay.apply(record));
    const again = workflows.evaluate(workflowKey({ id: WF, tenant: 'acme' })) as Evaluation;
    expect(again.state).to.equal('completed');
    expect(again.publish).to.deep.equal([]);
    expect(again.cancel).to.deep.equal([]);
    expect(replay.batch(WF)?.counts).to.deep.equal(stream.batches.batch(WF)?.counts);
    // Read up to any point, a second reader is due exactly what the first published next.
    for (let cut = 1; cut < stream.log.length; cut++) {
      const partial = new BatchFold();
      const reader = new WorkflowFold(partial);
      for (const record of stream.log.slice(0, cut)) reader.observe(record, partial.apply(record));
      const due = (reader.evaluate(workflowKey({ id: WF, tenant: 'acme' })) as Evaluation).publish.map((d) => d.node.job as string);
      const later = stream.log
        .slice(cut)
        .filter((record): record is CreatedReport => record.kind === 'created')
        .map((record) => record.job);
      for (const id of due) expect(later).to.include(id);
    }
  });

  it("takes the first definition of a tenant's id; another tenant's of that id is its own", () => {
    const stream = new Stream(chain(job('a')));
    const definition = checkWorkflow(group(job('x'), job('y')));
    const second: WorkflowRecord = {
      kind: 'workflow',
      id: 'again',
      workflow: WF,
      tenant: 'acme',
      definition,
      jobs: [step('0'), step('1')],
      at,
    };
    stream.append(second);
    expect(stream.workflows.workflow(WF)?.type).to.equal('chain');
    expect(stream.batches.batch(WF)?.counts.known).to.equal(1);
    const intruder: WorkflowRecord = { ...second, id: 'other', workflow: 'wf-2', tenant: 'globex' };
    stream.append({ ...created('j'), batch: 'wf-2', tenant: 'acme' });
    stream.append(intruder);
    // globex's workflow of an id acme's batch has is globex's own; acme's batch is untouched.
    expect(stream.workflows.workflow('wf-2', 'globex')?.tenant).to.equal('globex');
    expect(stream.workflows.workflow('wf-2', 'acme')).to.equal(undefined);
    expect(stream.batches.batch('wf-2', 'acme')?.counts).to.include({ known: 1, in_flight: 1 });
    // Of its jobs, the id acme's workflow has is refused, not counted in globex's batch.
    expect(stream.batches.batch('wf-2', 'globex')).to.deep.include({ refused: 1 });
    expect(stream.batches.batch('wf-2', 'globex')?.counts.known).to.equal(1);
  });
});

describe('workflow definitions', () => {
  it('refuses what is not a workflow, naming the field', () => {
    expect(() => checkWorkflow({ type: 'chain', steps: [] })).to.throw(/workflow: "steps" must be a non-empty array/);
    expect(() => checkWorkflow(job('a'))).to.throw(/not a single job/);
    expect(() => checkWorkflow({ type: 'batch', jobs: [job('a')] })).to.throw(/a batch needs callbacks/);
    expect(() => checkWorkflow({ type: 'group', jobs: [{ queue: 'q', type: 't', unique: {} }] })).to.throw(
      /jobs\[0\]: "unique" is not taken/,
    );
    expect(() => checkWorkflow({ type: 'group', jobs: [{ queue: 'q', type: 't', arg: [] }] })).to.throw(/unknown field "arg"/);
    expect(() => checkWorkflow({ type: 'chain', steps: [{ type: 'group', steps: [job('a')] }] })).to.throw(
      /steps\[0\]: a group has "jobs"/,
    );
  });

  it('gives every step an id derived from the workflow and its place, callbacks the batch callback ids', () => {
    const plan = planOf(WF, checkWorkflow(chain(job('a'), batch([job('b')], { on_success: job('c') }))));
    expect(jobNodes(plan).map((node) => [node.path, node.job])).to.deep.equal([
      ['0', stepJobId(WF, '0')],
      ['1.0', stepJobId(WF, '1.0')],
      ['1.on_success', workflowCallbackId(WF, '1', 'on_success')],
    ]);
    expect(stepJobId(WF, '0')).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(stepJobId(WF, '0')).to.equal(planOf(WF, checkWorkflow(chain(job('a')))).children[0]?.job);
  });
});
