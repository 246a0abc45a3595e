import { expect } from 'chai';
import { InvalidPayloadError } from '../../src/errors/errors.js';
import { fromWire, toWire } from '../../src/job/amqp-mapping.js';
import { createJob, JOB_CONTENT_TYPE } from '../../src/job/envelope.js';
import { createUuidV7 } from '../../src/job/uuid-v7.js';
import { childTraceparent } from '../../src/job/trace-context.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('job envelope and AMQP mapping', () => {
  it('creates an OJS envelope with a UUIDv7 id, attempt 1 and the parent in meta', () => {
    const job = createJob({ type: 'doc.text', args: ['a'], meta: { k: 1 } }, { queue: 'representations', tenant: 'acme', parentId: 'p1' });
    expect(job.id).to.match(UUID_V7);
    expect(job).to.include({ specversion: '1.0.0-rc.1', type: 'doc.text', queue: 'representations', attempt: 1, tenant: 'acme' });
    expect(job.meta).to.deep.equal({ k: 1, parent_id: 'p1' });
    expect(Date.parse(job.created_at)).to.be.closeTo(Date.now(), 5000);
  });

  it('sorts UUIDv7 ids by creation time', () => {
    const ids = Array.from({ length: 50 }, () => createJob({ type: 't' }, { queue: 'q' }).id);
    expect([...ids].sort()).to.deep.equal(ids);
  });

  it('maps the envelope to the properties and x-ojs headers of the OJS AMQP binding', () => {
    const job = createJob(
      { type: 't', priority: 12, enqueue_ttl: 'PT30S', scheduled_at: '2026-01-01T00:00:00Z' },
      { queue: 'q', tenant: 'acme' },
    );
    const tp = childTraceparent();
    const wire = toWire(job, { tenantHeader: 'org', traceparent: tp, headers: { mime: 'application/pdf', 'x-ojs-tenant': 'evil' } });
    expect(wire.options).to.include({
      messageId: job.id,
      type: 't',
      contentType: JOB_CONTENT_TYPE,
      persistent: true,
      priority: 9,
      expiration: '30000',
    });
    expect(wire.options.timestamp).to.equal(Math.floor(Date.parse(job.created_at) / 1000));
    expect(wire.options.headers).to.deep.equal({
      mime: 'application/pdf',
      'x-ojs-queue': 'q',
      'x-ojs-attempt': 1,
      'x-ojs-tenant': 'acme',
      org: 'acme',
      'x-ojs-scheduled-at': '2026-01-01T00:00:00Z',
      'x-ojs-traceparent': tp,
    });
    expect(JSON.parse(wire.content.toString())).to.deep.equal(job);
  });

  it('reads a message back, the attempt header winning over the body', () => {
    const job = createJob({ type: 't', args: [1] }, { queue: 'q', tenant: 'acme' });
    const wire = toWire(job, { tenantHeader: 'x-ojs-tenant' });
    const headers = { ...wire.options.headers, 'x-ojs-attempt': 3 };
    const decoded = fromWire({ content: wire.content, properties: { headers, contentType: JOB_CONTENT_TYPE } });
    expect(decoded.job).to.deep.equal({ ...job, attempt: 3 });
    expect(decoded.headers).to.equal(headers);
  });

  it('takes the tenant from the header when a foreign producer leaves it out of the body', () => {
    const body = Buffer.from(JSON.stringify({ id: 'x', type: 't', queue: 'q', args: [] }));
    const decoded = fromWire({ content: body, properties: { headers: { 'x-ojs-tenant': 'globex' } } });
    expect(decoded.job).to.include({ tenant: 'globex', attempt: 1 });
  });

  const invalid: Array<[string, Buffer, string | undefined, RegExp]> = [
    ['not JSON', Buffer.from('{nope'), JOB_CONTENT_TYPE, /not JSON/],
    ['a JSON array', Buffer.from('[1]'), JOB_CONTENT_TYPE, /not an OJS envelope/],
    ['no type', Buffer.from('{"id":"1","queue":"q","args":[]}'), JOB_CONTENT_TYPE, /"type"/],
    ['args not an array', Buffer.from('{"id":"1","type":"t","queue":"q","args":{}}'), JOB_CONTENT_TYPE, /"args"/],
    ['a bad attempt', Buffer.from('{"id":"1","type":"t","queue":"q","args":[],"attempt":0}'), JOB_CONTENT_TYPE, /"attempt"/],
    ['another content type', Buffer.from('{}'), 'text/xml', /content type "text\/xml"/],
  ];
  for (const [what, content, contentType, reason] of invalid) {
    it(`refuses ${what} with INVALID_PAYLOAD and the reason`, () => {
      expect(() => fromWire({ content, properties: { contentType } }))
        .to.throw(InvalidPayloadError, reason)
        .with.property('code', 'INVALID_PAYLOAD');
    });
  }

  it('continues the trace of the parent with a new span id', () => {
    const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const child = childTraceparent(parent);
    expect(child).to.match(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    expect(child).not.to.equal(parent);
    expect(childTraceparent('garbage')).to.match(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });
});

describe('UUIDv7', () => {
  it('writes version 7 and the RFC 9562 variant, with the millisecond timestamp first', () => {
    const id = createUuidV7()(0x0123456789ab);
    expect(id).to.match(UUID_V7);
    expect(id.slice(0, 13)).to.equal('01234567-89ab');
  });

  it('keeps ids of one millisecond in creation order and never repeats one', () => {
    const uuidv7 = createUuidV7();
    const ids = Array.from({ length: 5000 }, () => uuidv7(1_700_000_000_000));
    expect([...ids].sort()).to.deep.equal(ids);
    expect(new Set(ids).size).to.equal(ids.length);
  });

  it('stays ordered when the clock steps back', () => {
    const uuidv7 = createUuidV7();
    const later = uuidv7(1_800_000_000_000);
    expect(uuidv7(1_799_999_999_000) > later).to.equal(true);
  });
});
