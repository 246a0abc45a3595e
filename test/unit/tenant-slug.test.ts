import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { exitCodeFor } from '../../src/cli/exit-codes.js';
import { resolveTenant } from '../../src/cli/resolve-tenant.js';
import { compileConfig, SCHEMA_PATH } from '../../src/config/compile-config.js';
import { ConfigError, InvalidPayloadError, StagecoachError, TenantError } from '../../src/errors/errors.js';
import { fromWire } from '../../src/job/amqp-mapping.js';
import { createJob, JOB_CONTENT_TYPE } from '../../src/job/envelope.js';
import { createLogger } from '../../src/logging/logger.js';
import { StageRunner } from '../../src/runner/stage-runner.js';
import { loadAllStages } from '../../src/stage/stage-loader.js';
import { withTestConfig } from '../../src/testing/test-config.js';
import { checkTenantSlug, isTenantSlug, TENANT_SLUG } from '../../src/util/tenant-slug.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const RULE = '(^[a-z0-9][a-z0-9_-]{0,62}$: lowercase letters, digits, "_" and "-", no dots, at most 63 characters)';

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected an error');
}

describe('tenant slugs', () => {
  const good = ['acme', 'a', '0', 'acme_corp-2', 'x'.repeat(63)];
  const bad = ['', 'acme.pdf', 'Acme', 'Bad Tenant X', '-acme', '_acme', 'x'.repeat(64), 'acme\n', 'æøå', 'acme/pdf', 'acme*'];

  it('takes slugs and refuses dots, capitals, spaces, leading "-" or "_", and more than 63 characters', () => {
    expect(
      good.filter((t) => !isTenantSlug(t)),
      'refused',
    ).to.deep.equal([]);
    expect(
      bad.filter((t) => isTenantSlug(t)),
      'taken',
    ).to.deep.equal([]);
    expect([42, null, undefined, ['acme'], { name: 'acme' }].some((v) => isTenantSlug(v))).to.equal(false);
  });

  it('is the pattern of the shipped JSON Schema', () => {
    const schema = JSON.parse(readFileSync(SCHEMA_PATH, 'utf8')) as { definitions: { tenant: { pattern: string } } };
    expect(TENANT_SLUG.source).to.equal(schema.definitions.tenant.pattern);
    expect(TENANT_SLUG.flags, 'no flags: no case folding, no multiline').to.equal('');
  });

  it('checkTenantSlug returns a slug and throws a TenantError naming where, the value and the rule (exit 2)', () => {
    expect(checkTenantSlug('acme', '--tenant')).to.equal('acme');
    const err = thrown(() => checkTenantSlug('acme.pdf', '--tenant'));
    expect(err).to.be.instanceOf(TenantError).and.instanceOf(StagecoachError);
    expect(err).to.include({ code: 'INVALID_REQUEST', tenant: 'acme.pdf', name: 'TenantError' });
    expect((err as Error).message).to.equal(`--tenant: "acme.pdf" is not a tenant slug ${RULE}`);
    expect(exitCodeFor(err)).to.equal(2);
    expect((thrown(() => checkTenantSlug(7, 'tenant')) as Error).message).to.equal(`tenant: number 7 is not a tenant slug ${RULE}`);
  });

  it('the command line takes --tenant, else STAGECOACH_TENANT (empty = unset), each checked under its own name', () => {
    expect(resolveTenant('acme', { STAGECOACH_TENANT: 'globex' })).to.equal('acme');
    expect(resolveTenant(undefined, { STAGECOACH_TENANT: 'globex' })).to.equal('globex');
    expect(resolveTenant(undefined, { STAGECOACH_TENANT: '' })).to.equal(undefined);
    expect(resolveTenant(undefined, {})).to.equal(undefined);
    expect(() => resolveTenant('', {})).to.throw(TenantError, /^--tenant: "" is not a tenant slug/);
    expect(() => resolveTenant(undefined, { STAGECOACH_TENANT: 'acme.pdf' })).to.throw(
      TenantError,
      /^STAGECOACH_TENANT: "acme\.pdf" is not a tenant slug/,
    );
  });

  it('a configuration with a tenant that is not a slug is refused naming the key and the rule', () => {
    const err = thrown(() => compileConfig({ tenants: ['acme', 'acme.pdf'] }, '/etc/stagecoach.json'));
    expect(err).to.be.instanceOf(ConfigError);
    expect((err as Error).message).to.equal(`/etc/stagecoach.json: tenants.1: a tenant slug ${RULE}`);
  });

  it('createJob (Publisher, ctx.emit, the harness) refuses an origin tenant that is not a slug', () => {
    expect(() => createJob({ type: 't' }, { queue: 'q', tenant: 'Bad Tenant X' }))
      .to.throw(TenantError, `tenant: "Bad Tenant X" is not a tenant slug ${RULE}`)
      .with.property('tenant', 'Bad Tenant X');
    expect(createJob({ type: 't' }, { queue: 'q', tenant: 'acme' }).tenant).to.equal('acme');
  });

  describe('on receipt (fromWire)', () => {
    const envelope = { id: '1', type: 't', queue: 'q', args: [] };
    const receive = (fields: Record<string, unknown>, headers: Record<string, unknown>, tenantHeader?: string): unknown =>
      fromWire(
        { content: Buffer.from(JSON.stringify({ ...envelope, ...fields })), properties: { contentType: JOB_CONTENT_TYPE, headers } },
        tenantHeader,
      );
    const reason = (fn: () => unknown): string => {
      const err = thrown(fn);
      expect(err).to.be.instanceOf(InvalidPayloadError).with.property('code', 'INVALID_PAYLOAD');
      return (err as Error).message;
    };

    it('refuses an x-ojs-tenant header that is not a slug, even when the body names a good tenant', () => {
      expect(reason(() => receive({ tenant: 'acme' }, { 'x-ojs-tenant': 'Bad Tenant' }))).to.equal(
        `header "x-ojs-tenant": "Bad Tenant" is not a tenant slug ${RULE}`,
      );
      expect(reason(() => receive({}, { 'x-ojs-tenant': 'acme.pdf' }))).to.match(/^header "x-ojs-tenant": "acme\.pdf" is not/);
      expect(reason(() => receive({}, { 'x-ojs-tenant': 12 }))).to.match(/^header "x-ojs-tenant": number 12 is not a tenant slug/);
    });

    it('refuses the configured tenant header when it is not a slug, and x-ojs-tenant beside it', () => {
      expect(reason(() => receive({}, { org: 'Acme Corp', 'x-ojs-tenant': 'acme' }, 'org'))).to.match(
        /^header "org": "Acme Corp" is not a tenant slug/,
      );
      expect(reason(() => receive({}, { org: 'acme', 'x-ojs-tenant': 'acme.pdf' }, 'org'))).to.match(/^header "x-ojs-tenant": "acme\.pdf"/);
    });

    it("refuses an envelope's tenant that is not a slug, naming the field", () => {
      expect(reason(() => receive({ tenant: 'acme.pdf' }, { 'x-ojs-tenant': 'acme' }))).to.equal(
        `the envelope's "tenant": "acme.pdf" is not a tenant slug ${RULE}`,
      );
      expect(reason(() => receive({ tenant: null }, {}))).to.match(/^the envelope's "tenant": object null is not a tenant slug/);
    });

    it('takes slugs, and messages without any tenant (shared queues)', () => {
      expect(
        (receive({ tenant: 'acme' }, { 'x-ojs-tenant': 'acme', org: 'acme' }, 'org') as { job: { tenant: string } }).job.tenant,
      ).to.equal('acme');
      expect((receive({}, { org: 'globex' }, 'org') as { job: { tenant: string } }).job.tenant).to.equal('globex');
      expect((receive({}, {}) as { job: { tenant?: string } }).job.tenant).to.equal(undefined);
    });
  });

  describe('StageRunner (library users)', () => {
    const config = withTestConfig(
      {
        tenants: ['acme'],
        queues: { work: { variants: { by: 'kind', values: { pdf: ['pdf'] } } } },
        stages: { flaky: { module: './failure-stages.js' } },
      },
      path.join(here, '../fixtures/config.json'),
    );
    const log = createLogger({ test: 'tenant-slug' }, 'error');

    it("refuses a tenant that is not a slug, and a variant that is not one of its queue's own", async () => {
      const [stage] = await loadAllStages(config);
      const runner = (tenant: string, variant?: string): unknown =>
        new StageRunner({ config, stage, tenant, log, ...(variant === undefined ? {} : { variant }) });
      expect(() => runner('acme.pdf')).to.throw(TenantError, /^stage "flaky": tenant: "acme\.pdf" is not a tenant slug/);
      expect(() => runner('acme', 'constructor')).to.throw(ConfigError, /work\.variants\.values\.constructor: a configured variant/);
      expect((runner('acme', 'pdf') as StageRunner).queue).to.equal(`${config.prefix}.queue.work.acme.pdf`);
    });
  });
});
