import { expect } from 'chai';
import { createLogger } from '../../src/logging/logger.js';
import { setQueueState } from '../../src/queue-state/set-queue-state.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import type { ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'http-binding-queue-states' }, 'error');
const TOKEN = 'test-http-binding-states-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('the HTTP binding follows queue states (pause, resume)', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;

  const push = async (queue: string, n: number): Promise<string> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'state.probe', args: [n], options: { queue } });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.job.id as string;
  };
  const fetchJobs = async (queue: string, count: number, waitMs: number): Promise<Json[]> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { queues: [queue], count, wait_ms: waitMs, worker_id: 'w1' });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.jobs as Json[];
  };
  const ack = async (job: Json): Promise<void> => {
    expect((await ojs(base, 'POST', '/ojs/v1/workers/ack', { job_id: job.id })).status).to.equal(200);
  };
  /** Fetches until `count` jobs came (each acked), within a bound. */
  const drain = (queue: string, count: number): Promise<string[]> => {
    const got: string[] = [];
    return waitFor(`${count} jobs of ${queue} fetched`, async () => {
      for (const job of await fetchJobs(queue, count, 1000)) {
        got.push(job.id as string);
        await ack(job);
      }
      return got.length >= count ? got : undefined;
    });
  };

  before(async () => {
    binding = await startBindingServer(
      { queues: { _default: { scope: 'shared' }, work: {}, idle: {} }, stages: {} },
      'http-binding-states',
      TOKEN,
    );
    ({ project, base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it('a pause after the first fetch stops fetches, and a resume lets them go on', async () => {
    await push('work', 1);
    const [first] = await drain('work', 1);
    expect(first).to.be.a('string');
    // Paused by another process (the command line), as an operator would: the server hears it on the control exchange.
    await setQueueState(project.config, { queue: 'work' }, 'paused', log);
    const held = [await push('work', 2), await push('work', 3)];
    // Jobs are there (ready, or held by the server), yet a paused queue gives a worker none for the whole wait.
    expect(await fetchJobs('work', 2, 3000)).to.deep.equal([]);
    await setQueueState(project.config, { queue: 'work' }, 'active', log);
    expect((await drain('work', 2)).sort()).to.deep.equal([...held].sort());
  });

  it('a queue paused before its first fetch is consumed once resumed', async () => {
    await setQueueState(project.config, { queue: 'idle' }, 'paused', log);
    const ids = [await push('idle', 1), await push('idle', 2)];
    // This fetch starts the queue's consumer, paused.
    expect(await fetchJobs('idle', 2, 1500)).to.deep.equal([]);
    await setQueueState(project.config, { queue: 'idle' }, 'active', log);
    expect((await drain('idle', 2)).sort()).to.deep.equal([...ids].sort());
  });

  it('pauses a queue that has no job yet through the API, in the OJS answer shape, and resumes it', async () => {
    const paused = await ojs(base, 'POST', '/ojs/v1/queues/fresh/pause');
    expect(paused.status, JSON.stringify(paused.body)).to.equal(200);
    expect(paused.body.queue).to.deep.include({ name: 'fresh', paused: true });
    const id = await push('fresh', 1);
    expect(await fetchJobs('fresh', 1, 1500)).to.deep.equal([]);
    const resumed = await ojs(base, 'POST', '/ojs/v1/queues/fresh/resume');
    expect(resumed.status, JSON.stringify(resumed.body)).to.equal(200);
    expect(resumed.body.queue).to.deep.include({ name: 'fresh', paused: false });
    expect(await drain('fresh', 1)).to.deep.equal([id]);
  });
});
