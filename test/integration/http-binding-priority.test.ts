import { expect } from 'chai';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';

const TOKEN = 'test-http-binding-priority-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('the HTTP binding hands out higher priorities first', function () {
  this.timeout(60_000);
  let binding: BindingServer | undefined;
  let base: string;

  const push = async (queue: string, label: string, priority?: number): Promise<string> => {
    const options = priority === undefined ? { queue } : { queue, priority };
    const answer = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'rank.probe', args: [label], options });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.job.id as string;
  };
  const fetchOne = async (queue: string): Promise<Json> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: [queue], worker_id: 'w-rank' });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    const [job] = answer.body.jobs as Json[];
    expect(job, 'a job fetched').to.not.equal(undefined);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: job?.id })).status).to.equal(200);
    return job as Json;
  };

  before(async () => {
    binding = await startBindingServer(
      { queues: { _default: { scope: 'shared' }, ranked: { max_priority: 9 } }, stages: {} },
      'http-binding-priority',
      TOKEN,
    );
    ({ base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it('LOW (-10), NORMAL (0) and HIGH (10), pushed in that order, are fetched HIGH, NORMAL, LOW; equal ones first come first served', async () => {
    await push('ranked', 'low', -10);
    await push('ranked', 'normal', 0);
    await push('ranked', 'plain');
    await push('ranked', 'high', 10);
    const order: unknown[] = [];
    for (let i = 0; i < 4; i++) order.push(((await fetchOne('ranked')).args as unknown[])[0]);
    expect(order).to.deep.equal(['high', 'normal', 'plain', 'low']);
  });
});
