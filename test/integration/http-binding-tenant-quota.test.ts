import { expect } from 'chai';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { startBindingServer, type BindingServer } from '../helpers/binding-server.js';
import type { ConfigFile } from '../helpers/config-file.js';
import { ojsClient, type OjsAnswer } from '../helpers/ojs-client.js';
import { waitFor } from '../helpers/wait-for.js';

const TOKEN = 'test-http-binding-quota-token-0123456789';
const ojs = ojsClient(TOKEN);

describe("the HTTP binding: a tenant's quota refused at enqueue (429 TENANT_LIMIT_EXCEEDED)", function () {
  this.timeout(90_000);
  let project: ConfigFile;
  let binding: BindingServer | undefined;
  let base: string;

  const push = (queue: string, as: { token?: string; tenant?: string }): Promise<OjsAnswer> =>
    ojs(base, 'POST', '/ojs/v1/jobs', { type: 'quota.probe', args: [], options: { queue } }, as);
  /** Pushes until the broker refuses one (its bound is put as a policy, which it applies within moments), at most `most`. */
  const pushUntilRefused = async (queue: string, as: { token?: string; tenant?: string }, most: number): Promise<OjsAnswer> => {
    let accepted = 0;
    return waitFor(`a push to ${queue} refused`, async () => {
      const answer = await push(queue, as);
      if (answer.status === 201) {
        accepted++;
        expect(accepted, 'pushes accepted').to.be.at.most(most);
        return undefined;
      }
      return answer;
    });
  };

  before(async () => {
    binding = await startBindingServer(
      {
        tenants: [
          { name: 'acme', queues: { orders: { max_size: 2 } } },
          'globex',
          { name: 'initech', queues: { _default: { max_size: 1 } } },
        ],
        queues: { _default: { scope: 'shared' }, orders: { scope: 'tenant' }, capped: { scope: 'tenant', max_size: 1 } },
        stages: {},
      },
      'http-binding-quota',
      TOKEN,
    );
    ({ project, base } = binding);
  });

  after(async () => {
    await binding?.close();
  });

  it("refuses a push past the tenant's own max_size with TENANT_LIMIT_EXCEEDED, naming the limit; another tenant pushes on", async () => {
    const acme = { token: tenantToken(TOKEN, project.config.prefix, 'acme') };
    const refused = await pushUntilRefused('orders', acme, 2);
    expect(refused.status, JSON.stringify(refused.body)).to.equal(429);
    expect(refused.body.error).to.deep.include({ code: 'tenant_limit_exceeded', retryable: true });
    expect(refused.body.error.details).to.deep.equal({ tenant_id: 'acme', queue: 'orders', limit: 'max_size', maximum: 2 });
    const again = await fetch(`${base}/ojs/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'quota.probe', args: [], options: { queue: 'orders' } }),
    });
    expect(again.status).to.equal(429);
    expect(again.headers.get('retry-after')).to.equal('1');
    // globex has no quota of its own: its queue of the same name is its own.
    for (let n = 0; n < 3; n++) expect((await push('orders', { tenant: 'globex' })).status).to.equal(201);
  });

  it("counts the tenant's _default bound as its quota, unless the queue's own settings bound it", async () => {
    const refused = await pushUntilRefused('orders', { tenant: 'initech' }, 1);
    expect(refused.status).to.equal(429);
    expect(refused.body.error.details).to.deep.include({ tenant_id: 'initech', limit: 'max_size', maximum: 1 });
    // `capped` bounds every tenant's queue alike: that is the queue's bound, QUEUE_FULL.
    const full = await pushUntilRefused('capped', { tenant: 'initech' }, 1);
    expect(full.status).to.equal(429);
    expect(full.body.error.code).to.equal('QUEUE_FULL');
  });
});
