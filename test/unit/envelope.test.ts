import { expect } from 'chai';
import { InvalidPayloadError } from '../../src/errors/errors.js';
import { fromWire, toWire } from '../../src/job/amqp-mapping.js';
import { createJob, JOB_CONTENT_TYPE, parseEnvelope } from '../../src/job/envelope.js';
import { createUuidV7 } from '../../src/job/uuid-v7.js';
import { childTraceparent } from '../../src/job/trace-context.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('job envelope and AMQP mapping', () => {
  it('creates an OJS envelope with a UUIDv7 id, attempt 1 and the parent in meta', () => {
    const job = createJob({ type: 'doc.text', args: ['a'], meta: { k: 1 } }, { queue: 'representations', tenant: 'acme', parentId: 'p1' });
    expect(job.id).to.match(UUID_V7);
    expect(job).to.include({ specversion: '1.0', type: 'doc.text', queue: 'representations', attempt: 1, tenant: 'acme' });
    expect(job.meta).to.deep.equal({ k: 1, parent_id: 'p1' });
    expect(Date.parse(job.created_at)).to.be.closeTo(Date.now(), 5000);
  });

  it('writes specversion "1.0" (ojs-core 5.1) and reads envelopes of "1.0" and "1.0.0-rc.1" as they are', () => {
    const written = createJob({ type: 't' }, { queue: 'q' });
    expect(written.specversion).to.equal('1.0');
    for (const specversion of ['1.0', '1.0.0-rc.1']) {
      expect(parseEnvelope({ ...written, specversion }).specversion).to.equal(specversion);
    }
    const without: Record<string, unknown> = { ...written };
    delete without.specversion;
    expect(parseEnvelope(without).specversion).to.equal('1.0');
  });

  it('keeps tags on the envelope, each once, and refuses tags that are not short strings', () => {
    expect(createJob({ type: 't', tags: ['a', 'b', 'a'] }, { queue: 'q' }).tags).to.deep.equal(['a', 'b']);
    expect(createJob({ type: 't' }, { queue: 'q' })).to.not.have.property('tags');
    expect(() => createJob({ type: 't', tags: [''] }, { queue: 'q' })).to.throw(InvalidPayloadError, '"tags"');
    expect(() => createJob({ type: 't', tags: 'a' as unknown as string[] }, { queue: 'q' })).to.throw(InvalidPayloadError, '"tags"');
    expect(() => parseEnvelope({ ...createJob({ type: 't' }, { queue: 'q' }), tags: [1] })).to.throw(InvalidPayloadError, '"tags"');
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
      // OJS 12 on the broker's levels (amqp-priority.ts): above 0's 4.
      priority: 5,
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

  describe('fields a stage acts on, checked on receipt', () => {
    const envelope = { id: '1', type: 't', queue: 'q', args: [] };
    const receive = (fields: Record<string, unknown>): unknown =>
      fromWire({ content: Buffer.from(JSON.stringify({ ...envelope, ...fields })), properties: { contentType: JOB_CONTENT_TYPE } });

    it('refuses a retry policy with a coefficient that is not a number, naming the field (no NaN delays)', () => {
      expect(() => receive({ retry: { max_attempts: 5, backoff_coefficient: 'x' } }))
        .to.throw(InvalidPayloadError)
        .with.property('message', `the envelope's "retry": backoff_coefficient must be a number >= 1`);
    });

    const bad: Array<[string, Record<string, unknown>, RegExp]> = [
      ['a retry policy that is not an object', { retry: 5 }, /^the envelope's "retry": must be an object$/],
      ['zero max_attempts', { retry: { max_attempts: 0 } }, /^the envelope's "retry": max_attempts must be an integer >= 1$/],
      ['a non-ISO interval', { retry: { initial_interval: 'soon' } }, /^the envelope's "retry": initial_interval must be an ISO 8601/],
      ['a coefficient below 1', { retry: { backoff_coefficient: 0.5 } }, /^the envelope's "retry": backoff_coefficient/],
      ['an unknown retry field', { retry: { max_attempts: 2, tries: 3 } }, /^the envelope's "retry": unknown field "tries"$/],
      ['a priority that is a string', { priority: 'high' }, /^the envelope's "priority" must be an integer/],
      ['a fractional priority', { priority: 1.5 }, /^the envelope's "priority" must be an integer/],
      ['a null priority', { priority: null }, /^the envelope's "priority" must be an integer/],
      [
        'an enqueue_ttl that is not an ISO 8601 duration',
        { enqueue_ttl: '30s' },
        /^the envelope's "enqueue_ttl" must be an ISO 8601 duration/,
      ],
      ['an enqueue_ttl in milliseconds', { enqueue_ttl: 30000 }, /^the envelope's "enqueue_ttl" must be an ISO 8601 duration/],
      [
        'a scheduled_at that is not a timestamp',
        { scheduled_at: 'tomorrow' },
        /^the envelope's "scheduled_at" must be an ISO 8601 timestamp/,
      ],
      ['a scheduled_at without a time zone', { scheduled_at: '2026-01-01T09:00:00' }, /^the envelope's "scheduled_at" must be/],
      ['a scheduled_at on a day that does not exist', { scheduled_at: '2026-02-30T09:00:00Z' }, /^the envelope's "scheduled_at" must be/],
      ['a scheduled_at in epoch seconds', { scheduled_at: 1767225600 }, /^the envelope's "scheduled_at" must be/],
      ['a created_at that is not a timestamp', { created_at: 'yesterday' }, /^the envelope's "created_at" must be an ISO 8601 timestamp/],
    ];
    for (const [what, fields, reason] of bad) {
      it(`refuses ${what} with INVALID_PAYLOAD naming the field`, () => {
        expect(() => receive(fields))
          .to.throw(InvalidPayloadError, reason)
          .with.property('code', 'INVALID_PAYLOAD');
      });
    }

    it('takes what OJS allows: any integer priority (mapped to AMQP 0-9), durations, timestamps with a zone', () => {
      const fields = {
        priority: 10,
        retry: { max_attempts: 4, initial_interval: 'PT0.5S', backoff_coefficient: 1.5, max_interval: 'PT1M', jitter: false },
        enqueue_ttl: 'P1DT2H',
        scheduled_at: '2026-01-01T09:00:00.250+02:00',
        created_at: '2025-12-31T23:59:59Z',
      };
      expect((receive(fields) as { job: Record<string, unknown> }).job).to.deep.include(fields);
      expect((receive({ priority: -3 }) as { job: Record<string, unknown> }).job).to.include({ priority: -3 });
    });
  });

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
