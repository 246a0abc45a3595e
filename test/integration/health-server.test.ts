import { expect } from 'chai';
import type { Logger } from '../../src/logging/logger.js';
import { HealthServerError, startHealthServer, type HealthServer, type Readiness } from '../../src/observability/health-server.js';
import { StageMetrics } from '../../src/observability/stage-metrics.js';

const HOST = '127.0.0.1';

function recordingLogger(): { log: Logger; lines: { level: string; message: string; meta: unknown }[] } {
  const lines: { level: string; message: string; meta: unknown }[] = [];
  const at = (level: string) => (message: string, meta?: unknown) => {
    lines.push({ level, message, meta });
  };
  const log = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') } as unknown as Logger;
  return { log, lines };
}

describe('health server', () => {
  let server: HealthServer;
  let metrics: StageMetrics;
  let readiness: () => Readiness;
  let lines: ReturnType<typeof recordingLogger>['lines'];
  let base: string;

  beforeEach(async () => {
    const recorder = recordingLogger();
    lines = recorder.lines;
    metrics = new StageMetrics({ defaultMetrics: false });
    readiness = () => ({ ready: true });
    server = await startHealthServer({ port: 0, host: HOST, metrics, readiness: () => readiness(), log: recorder.log });
    base = `http://${HOST}:${server.port}`;
  });

  afterEach(async () => {
    await server.close();
  });

  it('listens on the free port it picked for port 0', () => {
    expect(server.port).to.be.a('number').above(0);
    expect(server.host).to.equal(HOST);
    expect(lines.some((l) => l.message === 'health server listening' && JSON.stringify(l.meta).includes(String(server.port)))).to.equal(
      true,
    );
  });

  it('answers /healthz with 200 ok', async () => {
    const res = await fetch(`${base}/healthz`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/plain/);
    expect(await res.text()).to.equal('ok\n');
  });

  it('answers /readyz with 200 when ready and 503 with the reason when not', async () => {
    let res = await fetch(`${base}/readyz`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    expect(await res.json()).to.deep.equal({ ready: true });

    readiness = () => ({ ready: false, reason: 'broker connection down' });
    res = await fetch(`${base}/readyz`);
    expect(res.status).to.equal(503);
    expect(await res.json()).to.deep.equal({ ready: false, reason: 'broker connection down' });

    readiness = () => ({ ready: false });
    res = await fetch(`${base}/readyz`);
    expect(res.status).to.equal(503);
    expect(await res.json()).to.deep.equal({ ready: false, reason: 'not ready' });

    readiness = () => ({ ready: true });
    expect((await fetch(`${base}/readyz`)).status).to.equal(200);
  });

  it('serves the metrics in the Prometheus text format', async () => {
    const m = metrics.instance({ stage: 'converter', queue: 'conversions', tenant: 'acme' });
    m.consumed();
    m.consumed();
    metrics.setQueueDepthSource(() => [
      { stage: 'converter', queue: 'conversions', tenant: 'acme', physicalQueue: 'ojs.queue.conversions.acme', depth: 5 },
    ]);

    const res = await fetch(`${base}/metrics`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal(metrics.contentType);
    const text = await res.text();
    expect(text).to.contain('# TYPE stagecoach_jobs_consumed_total counter');
    expect(text).to.contain('stagecoach_jobs_consumed_total{stage="converter",queue="conversions",tenant="acme"} 2');
    expect(text).to.contain(
      'stagecoach_queue_depth{stage="converter",queue="conversions",tenant="acme",physical_queue="ojs.queue.conversions.acme"} 5',
    );

    // A query string does not change the route.
    expect((await fetch(`${base}/metrics?name[]=x`)).status).to.equal(200);
  });

  it('answers 404 to anything else, 405 to another method, and HEAD without a body', async () => {
    for (const path of ['/', '/health', '/metrics/x', '/readyz/', '/__proto__', '/constructor']) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).to.equal(404);
      await res.arrayBuffer();
    }
    const post = await fetch(`${base}/healthz`, { method: 'POST', body: 'x' });
    expect(post.status).to.equal(405);
    expect(post.headers.get('allow')).to.equal('GET, HEAD');
    await post.arrayBuffer();

    const head = await fetch(`${base}/healthz`, { method: 'HEAD' });
    expect(head.status).to.equal(200);
    expect(await head.text()).to.equal('');
  });

  it('answers 500 when a check throws, and keeps serving', async () => {
    readiness = () => {
      throw new Error('readiness exploded');
    };
    let res = await fetch(`${base}/readyz`);
    expect(res.status).to.equal(500);
    await res.arrayBuffer();

    const broken = { contentType: 'text/plain', text: () => Promise.reject(new Error('collector exploded')) };
    const other = await startHealthServer({
      port: 0,
      host: HOST,
      metrics: broken,
      readiness: () => ({ ready: true }),
      log: recordingLogger().log,
    });
    try {
      res = await fetch(`http://${HOST}:${other.port}/metrics`);
      expect(res.status).to.equal(500);
      await res.arrayBuffer();
      expect((await fetch(`http://${HOST}:${other.port}/healthz`)).status).to.equal(200);
    } finally {
      await other.close();
    }

    expect(lines.some((l) => l.level === 'error' && JSON.stringify(l.meta).includes('readiness exploded'))).to.equal(true);
    res = await fetch(`${base}/healthz`);
    expect(res.status).to.equal(200);
    expect(await res.text()).to.equal('ok\n');
  });

  it('rejects with an error naming the port when the port is in use', async () => {
    let error: unknown;
    try {
      const second = await startHealthServer({ port: server.port, host: HOST, metrics, readiness, log: recordingLogger().log });
      await second.close();
    } catch (err) {
      error = err;
    }
    expect(error).to.be.instanceOf(HealthServerError);
    expect((error as HealthServerError).message).to.contain(`port ${server.port} is already in use`);
    expect((error as HealthServerError).code).to.equal('EADDRINUSE');
    expect((error as HealthServerError).port).to.equal(server.port);
    // The first server is untouched.
    expect((await fetch(`${base}/healthz`)).status).to.equal(200);
  });

  it('rejects a port out of range', async () => {
    for (const port of [-1, 65536, 1.5, Number.NaN]) {
      let error: unknown;
      try {
        await startHealthServer({ port, host: HOST, metrics, readiness, log: recordingLogger().log });
      } catch (err) {
        error = err;
      }
      expect(error, String(port)).to.be.instanceOf(HealthServerError);
    }
  });

  it('closes, even with a keep-alive connection open, and stops answering', async () => {
    const res = await fetch(`${base}/healthz`); // undici keeps this connection alive
    await res.text();
    await server.close();
    await server.close(); // twice is fine
    let error: unknown;
    try {
      await fetch(`${base}/healthz`);
    } catch (err) {
      error = err;
    }
    expect(error, 'fetch after close').to.be.instanceOf(Error);

    // The port is free again.
    const again = await startHealthServer({ port: server.port, host: HOST, metrics, readiness, log: recordingLogger().log });
    await again.close();
  });
});
