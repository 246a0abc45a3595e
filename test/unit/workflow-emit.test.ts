import { expect } from 'chai';
import { chain, group, Stage, UnknownOutputError, type Job, type StageContext, type StageHandler } from '../../src/index.js';
import { StageHarness } from '../../src/testing/index.js';
import { emittedWorkflowId, stepJobId } from '../../src/workflow/workflow-plan.js';

@Stage({ name: 'starter', input: 'scans', outputs: ['scans', 'reports'] })
class Starter implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<string[]> {
    const queue = String(job.args[0] ?? 'reports');
    const first = await ctx.emit(chain({ queue: 'scans', type: 'scan', args: [] }, { queue, type: 'report', args: [] }));
    const second = await ctx.emit(group({ queue: 'reports', type: 'a', args: [] }, { queue: 'reports', type: 'b', args: [] }));
    return [first, second];
  }
}

describe('ctx.emit(workflow)', () => {
  it("starts workflows in the handled job's tenant, with ids derived from the job's and their rank", async () => {
    const harness = await StageHarness.create(Starter, { tenant: 'acme' });
    const { result, workflows, emitted } = await harness.run({ type: 'scan', args: [], tenant: 'acme' });
    expect(emitted).to.deep.equal([]);
    expect(workflows).to.have.length(2);
    const [first, second] = workflows;
    const parent = first!.parent as string;
    expect(result).to.deep.equal([emittedWorkflowId(parent, 1), emittedWorkflowId(parent, 2)]);
    expect(first).to.deep.include({ workflow: emittedWorkflowId(parent, 1), tenant: 'acme' });
    expect(first!.jobs).to.deep.equal([stepJobId(first!.workflow, '0'), stepJobId(first!.workflow, '1')]);
    expect(second!.definition.type).to.equal('group');
    expect(first!.traceparent).to.match(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/);
  });

  it("refuses a workflow with a job outside the stage's outputs, before anything is recorded", async () => {
    const harness = await StageHarness.create(Starter, { tenant: 'acme' });
    try {
      await harness.run({ type: 'scan', args: ['elsewhere'], tenant: 'acme' });
      expect.fail('expected UnknownOutputError');
    } catch (err) {
      expect(err).to.be.instanceOf(UnknownOutputError);
    }
  });
});
