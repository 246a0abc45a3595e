import { expect } from 'chai';
import { startAdminServer } from '../../src/http-api/admin-server.js';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { createLogger } from '../../src/logging/logger.js';
import { MAX_QUEUE_POOLS } from '../../src/queue-pools/queue-pool.js';
import { BrokerNames } from '../../src/topology/names.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import { FAILURE_STAGES_MODULE, type ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';
import { AMQP_URL, RawBroker } from '../helpers/raw-broker.js';
import { waitFor } from '../helpers/wait-for.js';

const TOKEN = 'test-http-binding-queue-pools-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('the HTTP binding: queue pools of HTTP workers (strict, round-robin, weighted)', function () {
  this.timeout(180_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let broker: RawBroker | undefined;
  let base: string;
  let acme: { token: string };
  let globex: { token: string };

  const put = (name: string, body: unknown, as: { token?: string } = {}) => ojs(base, 'PUT', `/ojs/v1/admin/pools/${name}`, body, as);
  const pushAll = async (queue: string, labels: string[], as: { token?: string } = {}): Promise<void> => {
    const jobs = labels.map((label) => ({ type: 'pool.probe', args: [label], options: { queue } }));
    const answer = await ojs(base, 'POST', '/ojs/v1/jobs/batch', { jobs }, as);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
  };
  const fetchJobs = async (body: Json, as: { token?: string } = {}): Promise<Json[]> => {
    const answer = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { worker_id: 'w-pools', ...body }, as);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body.jobs as Json[];
  };
  /** Until every job pushed to the queues has left the broker for this server's runners (which hold them for workers). */
  const delivered = async (queues: string[], tenant?: string): Promise<void> => {
    const names = new BrokerNames(project.config.prefix);
    await waitFor(`the jobs of ${queues.join(', ')} delivered to the server`, async () => {
      for (const queue of queues) if ((await broker?.count(names.queue(queue, tenant))) !== 0) return false;
      return true;
    });
  };
  /** `n` fetches of one job each through `body`'s pool or queues: the queue of each. */
  const fetchEach = async (body: Json, n: number, as: { token?: string } = {}): Promise<string[]> => {
    const queues: string[] = [];
    for (let i = 0; i < n; i++) {
      // Long-poll: on a loaded machine the first deliveries may take longer than a plain fetch waits.
      const [job] = await fetchJobs({ ...body, count: 1, wait_ms: 10_000 }, as);
      expect(job, `fetch ${i + 1} of ${n}`).to.not.equal(undefined);
      queues.push(job?.queue as string);
    }
    return queues;
  };

  before(async () => {
    binding = await startBindingServer(
      {
        tenants: ['acme', 'globex'],
        queues: { _default: { scope: 'shared' }, scans: { scope: 'tenant' }, 'scan-a': { scope: 'tenant' }, 'scan-b': { scope: 'tenant' } },
        stages: { scanner: { module: FAILURE_STAGES_MODULE } },
      },
      'http-binding-queue-pools',
      TOKEN,
      { stages: [{ name: 'scanner', input: 'scans', outputs: [] }] },
    );
    ({ project, base } = binding);
    acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    globex = { token: tenantToken(TOKEN, project.config.prefix, 'globex') };
    broker = await RawBroker.connect();
  });

  after(async () => {
    await broker?.close();
    await binding?.close();
  });

  it('defines a pool with the admin token (201, then 200), shows it beside the stage pools, and deletes it', async () => {
    const created = await put('mixing', {
      name: 'mixing',
      strategy: 'weighted',
      queues: { 'mix-a': { weight: 70 }, 'mix-b': { weight: 30 } },
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body.pool).to.deep.include({ kind: 'queues', name: 'mixing', strategy: 'weighted', queues: ['mix-a', 'mix-b'] });
    expect(created.body.pool.weights).to.deep.equal({ 'mix-a': 70, 'mix-b': 30 });
    // The manifest claims the extension.
    expect((await ojs(base, 'GET', '/ojs/manifest')).body.extensions).to.include('fair-scheduling');
    const again = await put('mixing', { strategy: 'round-robin', queues: ['mix-a', 'mix-b', 'mix-c'] });
    expect(again.status, JSON.stringify(again.body)).to.equal(200);
    expect(again.body.pool).to.deep.include({ strategy: 'round-robin', created_at: created.body.pool.created_at });

    const list = await ojs(base, 'GET', '/ojs/v1/admin/pools');
    expect(list.body.items.map((pool: Json) => [pool.kind, pool.name])).to.deep.equal([
      ['stage', 'scanner'],
      ['queues', 'mixing'],
    ]);
    // A tenant's token sees it whole (its workers fetch through it); it holds no tenant's data.
    const seen = await ojs(base, 'GET', '/ojs/v1/admin/pools/mixing', undefined, acme);
    expect(seen.status).to.equal(200);
    expect(seen.body.pool.queues).to.deep.equal(['mix-a', 'mix-b', 'mix-c']);
    // Kept in the schedules stream: another admin server of the prefix (or this one restarted) knows it.
    const other = await startAdminServer({
      configFile: project.file,
      port: 0,
      token: TOKEN,
      log: createLogger({ test: 'http-binding-queue-pools' }, 'error'),
      env: { AMQP_URL },
      stages: [],
      scheduler: false,
    });
    try {
      const there = await ojs(`http://127.0.0.1:${other.port}`, 'GET', '/ojs/v1/admin/pools/mixing');
      expect(there.status).to.equal(200);
      expect(there.body.pool).to.deep.include({ strategy: 'round-robin', updated_at: again.body.pool.updated_at });
    } finally {
      await other.close();
    }

    const deleted = await ojs(base, 'DELETE', '/ojs/v1/admin/pools/mixing');
    expect(deleted.status).to.equal(200);
    expect(deleted.body).to.deep.include({ deleted: true });
    expect((await ojs(base, 'GET', '/ojs/v1/admin/pools/mixing')).status).to.equal(404);
    expect((await ojs(base, 'DELETE', '/ojs/v1/admin/pools/mixing')).status).to.equal(404);
    const refused = await ojs(base, 'POST', '/ojs/v1/workers/fetch', { pool: 'mixing' });
    expect(refused.status).to.equal(400);
    expect(refused.body.error.message).to.match(/"pool": no queue pool "mixing"/);
  });

  it("refuses a tenant's token (403), no token (401), bad input (400 naming the field) and a stage pool's name (409)", async () => {
    expect((await put('mine', { queues: ['a'] }, acme)).status).to.equal(403);
    expect((await put('mine', { queues: ['a'] }, { token: '' })).status).to.equal(401);
    expect((await put('owned', { queues: ['a'] })).status).to.equal(201);
    expect((await ojs(base, 'DELETE', '/ojs/v1/admin/pools/owned', undefined, acme)).status).to.equal(403);
    const bad: Array<[string, unknown, RegExp]> = [
      ['p', { queues: 'a' }, /"queues"/],
      ['p', { queues: ['a'], strategy: 'fastest' }, /"strategy"/],
      ['p', { queues: ['a'], strategy: 'weighted', weights: { a: -1 } }, /"weights.a"/],
      ['p', { name: 'other', queues: ['a'] }, /"name"/],
      ['Bad.Name', { queues: ['a'] }, /pool name/],
    ];
    for (const [name, body, message] of bad) {
      const answer = await put(name, body);
      expect(answer.status, JSON.stringify(body)).to.equal(400);
      expect(answer.body.error.message, JSON.stringify(body)).to.match(message);
    }
    const clash = await put('scanner', { queues: ['a'] });
    expect(clash.status).to.equal(409);
    expect(clash.body.error.message).to.match(/stage pool/);
    expect((await ojs(base, 'DELETE', '/ojs/v1/admin/pools/scanner')).status).to.equal(409);
    expect((await ojs(base, 'DELETE', '/ojs/v1/admin/pools/owned')).status).to.equal(200);
  });

  it(`holds at most ${MAX_QUEUE_POOLS} pools: the next is refused, a redefinition is not`, async () => {
    const names = Array.from({ length: MAX_QUEUE_POOLS }, (_, i) => `bound-${i}`);
    for (const name of names) expect((await put(name, { queues: ['a'] })).status, name).to.equal(201);
    const over = await put('bound-over', { queues: ['a'] });
    expect(over.status).to.equal(409);
    expect(over.body.error.message).to.match(new RegExp(`${MAX_QUEUE_POOLS} queue pools`));
    expect((await put('bound-0', { queues: ['b'] })).status).to.equal(200);
    for (const name of names) expect((await ojs(base, 'DELETE', `/ojs/v1/admin/pools/${name}`)).status, name).to.equal(200);
  });

  it('hands out about 3 jobs of the weight-3 queue for each of the weight-1 queue while both have jobs waiting', async () => {
    expect((await put('weighted', { strategy: 'weighted', queues: { heavy: { weight: 3 }, light: { weight: 1 } } })).status).to.equal(201);
    await pushAll(
      'heavy',
      Array.from({ length: 40 }, (_, i) => `h${i}`),
    );
    await pushAll(
      'light',
      Array.from({ length: 40 }, (_, i) => `l${i}`),
    );
    const queues = await fetchEach({ pool: 'weighted' }, 1);
    await delivered(['heavy', 'light']);
    queues.push(...(await fetchEach({ pool: 'weighted' }, 39)));
    const heavy = queues.filter((queue) => queue === 'heavy').length;
    // Exactly 30 of 40 while both have jobs on the board; strict would give 40, equal turns 20.
    expect(heavy, queues.join(' ')).to.be.within(27, 33);
    expect(queues.length - heavy).to.be.within(7, 13);
    // The worker's own strategy does not override the pool's (server-side configuration first).
    const overridden = await fetchEach({ pool: 'weighted', strategy: 'strict', queues: ['light'] }, 8);
    expect(overridden.filter((queue) => queue === 'heavy').length, overridden.join(' ')).to.be.within(5, 7);
  });

  it("round-robin alternates between the queues, through a pool or by the worker's own strategy", async () => {
    expect((await put('turns', { strategy: 'round-robin', queues: ['turn-x', 'turn-y'] })).status).to.equal(201);
    await pushAll('turn-x', ['x1', 'x2', 'x3', 'x4', 'x5', 'x6']);
    await pushAll('turn-y', ['y1', 'y2', 'y3', 'y4', 'y5', 'y6']);
    const queues = await fetchEach({ pool: 'turns' }, 1);
    await delivered(['turn-x', 'turn-y']);
    queues.push(...(await fetchEach({ pool: 'turns' }, 5)));
    expect(queues).to.deep.equal(['turn-x', 'turn-y', 'turn-x', 'turn-y', 'turn-x', 'turn-y']);
    // One fetch of several jobs takes them in turn as well.
    const several = await fetchJobs({ queues: ['turn-x', 'turn-y'], strategy: 'round-robin', count: 4 });
    expect(several.map((job) => job.queue)).to.deep.equal(['turn-x', 'turn-y', 'turn-x', 'turn-y']);
  });

  it("gives a tenant's fetch through a pool its own tenant's jobs only", async () => {
    expect((await put('scanning', { strategy: 'round-robin', queues: ['scan-a', 'scan-b'] })).status).to.equal(201);
    await pushAll('scan-a', ['acme-a1', 'acme-a2'], acme);
    await pushAll('scan-b', ['acme-b1', 'acme-b2'], acme);
    await pushAll('scan-a', ['globex-a1'], globex);
    const taken = async (as: { token: string }, n: number): Promise<string[]> => {
      const labels: string[] = [];
      await waitFor(`${n} jobs fetched`, async () => {
        for (const job of await fetchJobs({ pool: 'scanning', count: 10 }, as)) labels.push((job.args as string[])[0] as string);
        return labels.length >= n;
      });
      return labels;
    };
    expect(await taken(globex, 1)).to.deep.equal(['globex-a1']);
    expect((await taken(acme, 4)).sort()).to.deep.equal(['acme-a1', 'acme-a2', 'acme-b1', 'acme-b2']);
    expect(await fetchJobs({ pool: 'scanning', count: 10 }, globex)).to.deep.equal([]);
  });
});
