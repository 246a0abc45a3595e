import { expect } from 'chai';
import { clientWorkflowId, tenantJobId, tenantWorkflowId } from '../../src/job/tenant-ids.js';
import { uuidv7 } from '../../src/job/uuid-v7.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('tenant-ids: the ids a tenant chooses are kept per tenant', () => {
  it('keeps a job id as a UUIDv7 of the same time, the same for the same tenant, another for another tenant', () => {
    const id = uuidv7();
    const acme = tenantJobId('acme', id);
    expect(acme).to.match(UUID_V7);
    expect(acme.slice(0, 13)).to.equal(id.slice(0, 13));
    expect(tenantJobId('acme', id)).to.equal(acme);
    expect(tenantJobId('globex', id)).to.not.equal(acme);
    expect(acme).to.not.equal(id);
  });

  it("keeps a workflow id under its tenant's name, read back as the tenant gave it", () => {
    expect(tenantWorkflowId('acme', 'nightly')).to.equal('acme:nightly');
    expect(clientWorkflowId('acme', tenantWorkflowId('acme', 'acme:x'))).to.equal('acme:x');
    expect(clientWorkflowId('acme', '0190a6b2-0000-7000-8000-000000000000')).to.equal('0190a6b2-0000-7000-8000-000000000000');
  });
});
