import { expect } from 'chai';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';

const TOKEN = 'test-http-binding-rate-limit-token-0123456789';
const ojs = ojsClient(TOKEN);
/** One job a second per queue, as a push asks (the conformance suite's `max_per_second`). */
const ONE_A_SECOND = { max_per_second: 1 };

describe("the HTTP binding and a push's rate limit", function () {
  this.timeout(90_000);
  let binding: BindingServer | undefined;
  let base: string;

  const push = async (queue: string): Promise<string> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'rl.probe', args: [], options: { queue, rate_limit: ONE_A_SECOND } });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.job.id as string;
  };
  const fetchJobs = async (queue: string, waitMs?: number): Promise<Json[]> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/workers/fetch', {
      queues: [queue],
      worker_id: 'w-rl',
      ...(waitMs === undefined ? {} : { wait_ms: waitMs }),
    });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.jobs as Json[];
  };

  before(async () => {
    binding = await startBindingServer({ queues: { _default: { scope: 'shared' } }, stages: {} }, 'http-binding-rate-limit', TOKEN, {
      testReset: true,
    });
    ({ base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it('a fetch does not wait for a job held back by its rate limit: it answers none', async () => {
    // A loaded machine may take a second between the two fetches (the token is back by then, and
    // the job rightly given): such a round says nothing, and another queue is tried.
    for (let round = 0; round < 3; round++) {
      const queue = `limited-${round}`;
      await push(queue);
      await push(queue);
      const [first] = await fetchJobs(queue, 10_000);
      expect(first, 'the first job, within its limit').to.not.equal(undefined);
      const askedAt = Date.now();
      const second = await fetchJobs(queue);
      if (askedAt - Date.parse(first?.started_at as string) >= 800) continue;
      expect(second, 'the second job waits for its token: the fetch answers none rather than wait for it').to.deep.equal([]);
      return;
    }
    expect.fail('no round asked again within 800 ms of the first start');
  });

  it("the test reset keeps the limits' tokens: a limited queue serves again after it", async () => {
    await push('reset-limited');
    const [first] = await fetchJobs('reset-limited', 10_000);
    expect(first).to.not.equal(undefined);
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: first?.id })).status).to.equal(200);
    expect((await ojs(base, 'POST', '/ojs/v1/admin/reset')).status).to.equal(200);
    const id = await push('reset-limited');
    // The token spent before the reset is back a second after its spend: the job comes well within
    // the wait (a purged bucket stays empty until its keeper finds it short, seconds later).
    const [again] = await fetchJobs('reset-limited', 4000);
    expect(again?.id, 'the job pushed after the reset').to.equal(id);
  });
});
