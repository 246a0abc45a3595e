import { expect } from 'chai';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import { FAILURE_STAGES_MODULE, type ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';
import { waitFor } from '../helpers/wait-for.js';

const TOKEN = 'test-http-binding-pools-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('the admin port: pools and scheduling statistics (the pooled share)', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;
  let acme: { token: string };

  const get = async (route: string, as: { token?: string; tenant?: string } = {}): Promise<Json> => {
    const answer = await ojs(base, 'GET', route, undefined, as);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    return answer.body;
  };

  before(async () => {
    binding = await startBindingServer(
      {
        tenants: [{ name: 'acme', weight: 3 }, 'globex', { name: 'initech', max_concurrency: 1 }],
        queues: { _default: { scope: 'shared' }, scans: { scope: 'tenant' }, reports: { scope: 'shared' } },
        stages: { scanner: { module: FAILURE_STAGES_MODULE, concurrency: 9 }, reporter: { module: FAILURE_STAGES_MODULE } },
      },
      'http-binding-pools',
      TOKEN,
      {
        stages: [
          { name: 'scanner', input: 'scans', outputs: [] },
          { name: 'reporter', input: 'reports', outputs: [] },
        ],
      },
    );
    ({ project, base } = binding);
    acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
  });

  after(async () => {
    await binding?.close();
  });

  it('lists a pool per stage reading a tenant-scoped queue, with what the share gives each tenant when all are busy', async () => {
    const { items } = await get('/ojs/v1/admin/pools');
    expect(items.map((pool: Json) => pool.name)).to.deep.equal(['scanner']);
    const [pool] = items;
    expect(pool).to.include({ name: 'scanner', stage: 'scanner', concurrency: 9, strategy: 'weighted' });
    expect(pool.queues).to.deep.equal(['scans']);
    expect(pool.weights).to.deep.equal({ acme: 3, globex: 1, initech: 1 });
    expect(pool.tenants.map((t: Json) => [t.tenant_id, t.max_concurrency, t.busy_slots])).to.deep.equal([
      ['acme', null, 6.1],
      ['globex', null, 2],
      ['initech', 1, 0.9],
    ]);
    expect((await get('/ojs/v1/admin/pools/scanner')).pool).to.deep.equal(pool);
  });

  it('answers 404 for a name that is no pool: unknown, or a stage reading a shared queue', async () => {
    for (const name of ['nope', 'reporter']) {
      const answer = await ojs(base, 'GET', `/ojs/v1/admin/pools/${name}`);
      expect(answer.status, name).to.equal(404);
      expect(answer.body.error.message, name).to.match(/no pool/);
    }
  });

  it("shows a tenant's token its own place only; another tenant named is 403, no token 401", async () => {
    const { pool } = await get('/ojs/v1/admin/pools/scanner', acme);
    expect(pool.tenants.map((t: Json) => t.tenant_id)).to.deep.equal(['acme']);
    expect(pool.weights).to.deep.equal({ acme: 3 });
    const { items } = await get('/ojs/v1/admin/pools', acme);
    expect(items[0].tenants.map((t: Json) => t.tenant_id)).to.deep.equal(['acme']);
    const stats = await get('/ojs/v1/admin/scheduling/stats', acme);
    expect(stats.stats.pools[0].tenants.map((t: Json) => t.tenant_id)).to.deep.equal(['acme']);
    for (const route of ['/ojs/v1/admin/pools', '/ojs/v1/admin/pools/scanner', '/ojs/v1/admin/scheduling/stats']) {
      expect((await ojs(base, 'GET', route, undefined, { ...acme, tenant: 'globex' })).status, route).to.equal(403);
      expect((await fetch(`${base}${route}`)).status, route).to.equal(401);
    }
  });

  it("counts each tenant's jobs waiting in the pool's queue beside its share; a tenant's token counts its own", async () => {
    const push = async (as: { token?: string; tenant?: string }): Promise<void> => {
      const answer = await ojs(base, 'POST', '/ojs/v1/jobs', { type: 'scan.probe', args: [], options: { queue: 'scans' } }, as);
      expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    };
    await push(acme);
    await push(acme);
    await push({ tenant: 'globex' });
    const stats = await waitFor('the three jobs in the statistics', async () => {
      const body = await get('/ojs/v1/admin/scheduling/stats');
      return body.stats.pools[0].waiting_jobs === 3 ? body : undefined;
    });
    const [pool] = stats.stats.pools;
    expect(pool).to.include({ name: 'scanner', queue: 'scans', concurrency: 9, active_jobs: 0 });
    expect(pool.tenants.map((t: Json) => [t.tenant_id, t.busy_slots, t.waiting_jobs])).to.deep.equal([
      ['acme', 6.1, 2],
      ['globex', 2, 1],
      ['initech', 0.9, 0],
    ]);
    expect(stats.queues).to.deep.equal([{ name: 'scans', pool: 'scanner', active_jobs: 0, waiting_jobs: 3 }]);
    const own = (await get('/ojs/v1/admin/scheduling/stats', acme)).stats.pools[0];
    expect(own).to.include({ waiting_jobs: 2 });
    expect(own.tenants).to.have.length(1);
  });
});
