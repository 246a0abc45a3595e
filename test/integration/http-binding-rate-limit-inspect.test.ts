import { expect } from 'chai';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import type { ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type Json } from '../helpers/ojs-client.js';

const TOKEN = 'test-http-binding-rl-inspect-token-0123456789';
const ojs = ojsClient(TOKEN);

describe('GET /ojs/v1/rate-limits/{key} of a limit no job has taken a token of yet', function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;

  const push = async (rateLimit: Json, as: { token?: string; tenant?: string } = {}): Promise<void> => {
    const answer = await ojs(
      base,
      'POST',
      '/ojs/v1/jobs',
      { type: 'rl.probe', args: [], options: { queue: 'limited', rate_limit: rateLimit } },
      as,
    );
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
  };

  before(async () => {
    binding = await startBindingServer(
      {
        tenants: ['acme', 'globex'],
        queues: { _default: { scope: 'shared' }, limited: {}, owned: { scope: 'tenant' } },
        limits: { ocr: { concurrency: 3 }, scans: { per_tenant: true, rate: { limit: 10, period: 'PT1M' } } },
        stages: {},
      },
      'http-binding-rl-inspect',
      TOKEN,
    );
    ({ project, base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it('answers a configured limit, and a tenant partition of a per-tenant one, with every token free', async () => {
    const ocr = await ojs(base, 'GET', '/ojs/v1/rate-limits/ocr');
    expect(ocr.status, JSON.stringify(ocr.body)).to.equal(200);
    expect(ocr.body).to.deep.equal({
      key: 'ocr',
      configured: true,
      concurrency: { limit: 3, tokens: 3, active: 0, available: 3 },
      on_broker: false,
    });
    const scans = await ojs(base, 'GET', '/ojs/v1/rate-limits/scans@acme');
    expect(scans.status, JSON.stringify(scans.body)).to.equal(200);
    expect(scans.body.rate).to.deep.equal({ limit: 10, tokens: 10, period_ms: 60_000, current_count: 0 });
    // `ocr` is not per tenant, and nothing configures or carries `nope`.
    for (const key of ['ocr@acme', 'nope']) expect((await ojs(base, 'GET', `/ojs/v1/rate-limits/${key}`)).status, key).to.equal(404);
  });

  it("answers the policy a job pushed here carries, under the tenant's own key for a tenant's push", async () => {
    await push({ key: 'inspect-key', concurrency: 5, rate: { limit: 2, period: 'PT1S' } });
    const own = await ojs(base, 'GET', '/ojs/v1/rate-limits/inspect-key');
    expect(own.status, JSON.stringify(own.body)).to.equal(200);
    expect(own.body).to.deep.include({ key: 'inspect-key', configured: false, on_broker: false });
    expect(own.body.concurrency).to.deep.equal({ limit: 5, tokens: 5, active: 0, available: 5 });
    expect(own.body.rate).to.deep.include({ limit: 2, period_ms: 1000 });

    const acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    await push({ key: 'acme-key', concurrency: 1 }, acme);
    expect((await ojs(base, 'GET', '/ojs/v1/rate-limits/tenant.acme.acme-key')).status).to.equal(200);
    expect((await ojs(base, 'GET', '/ojs/v1/rate-limits/acme-key')).status).to.equal(404);
  });

  it("is the operator's: a tenant's token is refused (403), a request without a token 401", async () => {
    const acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    expect((await ojs(base, 'GET', '/ojs/v1/rate-limits/ocr', undefined, acme)).status).to.equal(403);
    expect((await fetch(`${base}/ojs/v1/rate-limits/ocr`)).status).to.equal(401);
  });
});
