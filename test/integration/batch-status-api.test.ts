import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import amqplib from 'amqplib';
import { expect } from 'chai';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { viewerToken } from '../../src/http-api/tenant-tokens.js';
import { stamp, type CreatedReport } from '../../src/tracking-stream/tracking-report.js';
import { uuidv7 } from '../../src/job/uuid-v7.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { sinkGate } from '../fixtures/batch-stages.js';
import { REPO_ROOT, runCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

/** Debian's chromium, as in dashboard.test.ts: never a browser downloaded by a library. */
const CHROMIUM = '/usr/bin/chromium';
const BATCH_STAGES_MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/batch-stages.js');
const STAGES = [
  { name: 'scanner', input: 'scans', outputs: ['files'] },
  { name: 'reader', input: 'files', outputs: ['parts'] },
  { name: 'sink', input: 'parts', outputs: [] },
] as unknown as StageMetadata[];
const env = { AMQP_URL };
const log = createLogger({ test: 'batch-status-api' }, 'error');

type Json = Record<string, unknown>;
interface Answer {
  status: number;
  body: Json & { error?: { code: string; message: string; retryable: boolean } };
}

// The page's globals, as the callbacks evaluated in the browser use them (tests compile without the DOM library).
declare const document: { querySelector(selector: string): { textContent: string | null } | null };
declare const sessionStorage: { removeItem(key: string): void; setItem(key: string, value: string): void };

describe('batch status in the admin API and the dashboard', function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let running: RunningGroup;
  let server: AdminServer;
  let root: string;
  const TOKEN = 'batch-status-token';
  const viewer = (): string => viewerToken(TOKEN, project.config.prefix, 'ops');

  const get = async (url: string): Promise<Answer> => {
    // A viewer's token reads (docs/security.md, "The admin port").
    const response = await fetch(`http://127.0.0.1:${server.port}${url}`, { headers: { authorization: `Bearer ${viewer()}` } });
    return { status: response.status, body: (await response.json()) as Answer['body'] };
  };
  /** What `stagecoach <args> --json` prints, parsed. */
  const cliJson = async (...args: string[]): Promise<unknown> => {
    const result = await runCli([...args, '--json', '--config', project.file], env);
    expect(result.code, result.stderr).to.equal(0);
    return JSON.parse(result.stdout) as unknown;
  };

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme', 'globex'],
        queues: { _default: { default_retry: { max_attempts: 3, initial_interval: 'PT1S' } }, scans: { scope: 'shared' } },
        stages: {
          scanner: { module: BATCH_STAGES_MODULE, concurrency: 4 },
          reader: { module: BATCH_STAGES_MODULE, concurrency: 4 },
          sink: { module: BATCH_STAGES_MODULE, concurrency: 4 },
        },
      },
      STAGES,
      'batch-status-api',
    );
    running = await startGroup(
      project.config,
      [{ stage: 'scanner' }, { stage: 'reader', tenant: 'acme' }, { stage: 'sink', tenant: 'acme' }],
      log,
    );
    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env });
    // 3 files, file 1 dead: 1 scan + 3 files + 4 parts, one of them failed.
    root = await running.publisher.publish('scans', { type: 'scan', args: [3, 1], tenant: 'acme', batch: 'scan-api' });
  });

  after(async () => {
    sinkGate.releaseAll();
    await server?.close();
    await running?.stop();
    await project?.remove();
  });

  it('answers a batch, its failed jobs and a job with the JSON the command line prints', async () => {
    const done = await waitFor(
      'scan-api completed, as the API shows it',
      async () => {
        const answer = await get('/ojs/v1/batches/scan-api');
        return answer.status === 200 && answer.body.state === 'completed' ? answer : undefined;
      },
      30_000,
    );
    expect(done.body).to.deep.include({ id: 'scan-api', tenant: 'acme', state: 'completed', announced: false, conflicts: 0 });
    expect(done.body.jobs).to.deep.equal({ known: 8, completed: 7, failed: 1, dead: 1, discarded: 0, cancelled: 0, in_flight: 0 });
    // The same JSON as `batch status --json`, which reads the stream itself.
    expect(await cliJson('batch', 'status', 'scan-api')).to.deep.equal(done.body);

    // The failed job, with its error, its stage and queue.
    const failed = await get('/ojs/v1/batches/scan-api/jobs?state=failed');
    expect(failed.status).to.equal(200);
    expect(failed.body).to.deep.include({ batch: 'scan-api', state: 'failed', total: 1 });
    const [dead] = failed.body.jobs as Json[];
    expect(dead).to.deep.include({
      batch: 'scan-api',
      tenant: 'acme',
      type: 'file',
      queue: 'files',
      stage: 'reader',
      state: 'dead',
      outcome: 'dead',
      attempts: 1,
      parent: root,
      children: 0,
      error: { type: 'UnreadableError', message: 'file 1 is unreadable' },
    });
    const all = await get('/ojs/v1/batches/scan-api/jobs');
    expect(all.body.total).to.equal(8);
    expect((await get('/ojs/v1/batches/scan-api/jobs?state=completed&limit=2')).body).to.deep.include({ total: 7 });
    expect(((await get('/ojs/v1/batches/scan-api/jobs?state=completed&limit=2')).body.jobs as Json[]).length).to.equal(2);

    // A job, as `job status --json` prints it: the root and the dead one.
    const job = await get(`/ojs/v1/jobs/${root}/status`);
    expect(job.status).to.equal(200);
    expect(job.body).to.deep.include({ id: root, batch: 'scan-api', type: 'scan', state: 'completed', stage: 'scanner', parent_id: null });
    expect((job.body.children as string[]).length).to.equal(3);
    expect(await cliJson('job', 'status', root)).to.deep.equal(job.body);
    expect(await cliJson('job', 'status', dead.id as string)).to.deep.equal((await get(`/ojs/v1/jobs/${dead.id as string}/status`)).body);

    // The list, all tenants or one.
    const list = await get('/ojs/v1/batches');
    expect(list.status).to.equal(200);
    expect((list.body.batches as Json[]).find((b) => b.id === 'scan-api')).to.deep.equal(done.body);
    expect(list.body.batches).to.deep.equal(await cliJson('batch', 'list'));
    expect(((await get('/ojs/v1/batches?tenant=acme')).body.batches as Json[]).map((b) => b.id)).to.include('scan-api');
    expect((await get('/ojs/v1/batches?tenant=globex')).body).to.deep.equal({ batches: [], total: 0, tenant: 'globex' });
    expect(((await get('/ojs/v1/batches?state=running')).body.batches as Json[]).map((b) => b.id)).not.to.include('scan-api');
  });

  it('answers 404 for a batch or job nobody reported, and 400 for a bad id or parameter, as OJS errors', async () => {
    for (const url of [
      '/ojs/v1/batches/never-seen',
      '/ojs/v1/batches/never-seen/jobs',
      '/ojs/v1/jobs/0190a0a0-0000-7000-8000-000000000000/status',
    ]) {
      const answer = await get(url);
      expect(answer.status, url).to.equal(404);
      // The binding's paths (/ojs/v1/jobs...) write its codes in lowercase (its error objects).
      expect(answer.body.error, url).to.include({ code: url.startsWith('/ojs/v1/jobs') ? 'not_found' : 'NOT_FOUND', retryable: false });
    }
    for (const url of [
      '/ojs/v1/batches/bad%20id',
      '/ojs/v1/batches?tenant=Not_A_Slug',
      '/ojs/v1/batches?limit=0',
      '/ojs/v1/batches/scan-api/jobs?state=FAILED',
    ]) {
      const answer = await get(url);
      expect(answer.status, url).to.equal(400);
      expect(answer.body.error?.code, url).to.equal('INVALID_REQUEST');
    }
    // A batch itself takes no POST: its directives are sub-resources.
    const post = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/batches/scan-api`, { method: 'POST' });
    expect(post.status).to.equal(405);
  });

  it('pauses, resumes and cancels a batch and pauses a tenant with the token, and refuses without it', async () => {
    const post = async (url: string, token?: string): Promise<Answer> => {
      const response = await fetch(`http://127.0.0.1:${server.port}${url}`, {
        method: 'POST',
        ...(token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } }),
      });
      return { status: response.status, body: (await response.json()) as Answer['body'] };
    };
    sinkGate.close();
    await running.publisher.publish('scans', { type: 'scan', args: [1, null, 'hold'], tenant: 'acme', batch: 'scan-directed' });
    await waitFor('scan-directed known', async () => (await get('/ojs/v1/batches/scan-directed')).status === 200);
    expect((await post('/ojs/v1/batches/scan-directed/pause')).status).to.equal(401);
    expect((await post('/ojs/v1/batches/scan-directed/pause', 'wrong')).status).to.equal(401);
    expect((await get('/ojs/v1/batches/scan-directed')).body.paused).to.equal(false);
    const paused = await post('/ojs/v1/batches/scan-directed/pause', 'batch-status-token');
    expect(paused).to.deep.include({ status: 200 });
    expect(paused.body).to.deep.include({ action: 'pause', batch: 'scan-directed' });
    expect((await get('/ojs/v1/batches/scan-directed')).body.paused).to.equal(true);
    expect((await post('/ojs/v1/batches/scan-directed/resume', 'batch-status-token')).body).to.include({ action: 'resume', moved: 0 });
    expect((await post('/ojs/v1/tenants/acme/pause', 'batch-status-token')).body).to.include({ action: 'pause', tenant: 'acme' });
    expect((await post('/ojs/v1/tenants/acme/resume', 'batch-status-token')).body).to.include({ action: 'resume', tenant: 'acme' });
    expect((await post('/ojs/v1/tenants/initech/pause', 'batch-status-token')).status).to.be.within(400, 404);
    const cancelled = await post('/ojs/v1/batches/scan-directed/cancel', 'batch-status-token');
    expect(cancelled.status).to.equal(200);
    sinkGate.releaseAll();
    await waitFor('scan-directed cancelled', async () => (await get('/ojs/v1/batches/scan-directed')).body.state === 'cancelled', 30_000);
    expect((await post('/ojs/v1/batches/scan-directed/cancel', 'batch-status-token')).status).to.equal(400);
  });

  it('sees a record appended just before the request, without polling', async () => {
    // `publish --batch` appends the `created` report and waits for its confirm before it returns:
    // the next request must see the batch, since the server reads the stream up to a mark first.
    const id = await running.publisher.publish('scans', { type: 'scan', args: [0], tenant: 'globex', batch: 'scan-fresh' });
    const batch = await get('/ojs/v1/batches/scan-fresh');
    expect(batch.status).to.equal(200);
    expect(batch.body).to.deep.include({ id: 'scan-fresh', tenant: 'globex' });
    expect((batch.body.jobs as Json).known).to.equal(1);
    expect((await get(`/ojs/v1/jobs/${id}`)).status).to.equal(200);
    // Requests at once share their marks; every answer is still up to date.
    const again = await Promise.all(Array.from({ length: 20 }, () => get('/ojs/v1/batches/scan-fresh')));
    expect(again.map((a) => a.status)).to.deep.equal(Array.from({ length: 20 }, () => 200));

    // A burst the follower needs a while to read: the answer right after its confirms counts all of it.
    const burst = 3000;
    const connection = await amqplib.connect(AMQP_URL);
    try {
      const channel = await connection.createConfirmChannel();
      for (let i = 0; i < burst; i++) {
        const record = stamp<CreatedReport>({
          kind: 'created',
          job: uuidv7(),
          batch: 'scan-burst',
          tenant: 'globex',
          queue: 'scans',
          type: 'scan',
        });
        channel.publish(project.names.tracking, '', Buffer.from(JSON.stringify(record)), { contentType: 'application/json' });
      }
      await channel.waitForConfirms();
    } finally {
      await connection.close();
    }
    const counted = await get('/ojs/v1/batches/scan-burst');
    expect(counted.status).to.equal(200);
    expect((counted.body.jobs as Json).known).to.equal(burst);
  });

  describe('the Batches view, in a headless browser', () => {
    let browser: Browser;
    let profile: string;
    let page: Page;
    const problems: string[] = [];

    before(async () => {
      if (!existsSync(CHROMIUM)) {
        throw new Error(`no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium), as .ci/run does`);
      }
      profile = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-chromium-'));
      browser = await puppeteer.launch({
        executablePath: CHROMIUM,
        headless: true,
        userDataDir: profile,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
      });
      page = await browser.newPage();
      await page.setViewport({ width: 1500, height: 1000 });
      // Signed in with a viewer's token for reads (the dashboard's sign-in is shown in dashboard.test.ts).
      await page.evaluateOnNewDocument((token: string) => sessionStorage.setItem('stagecoach.read-token', token), viewer());
      page.on('pageerror', (err) => problems.push(String(err)));
      page.on('console', (message) => {
        // The browser logs the refusal a wrong token earns (a 401): the page shows it, it is not a fault.
        if (message.type() === 'error' && !message.text().includes('401')) problems.push(message.text());
      });
    });

    after(async () => {
      await browser?.close();
      if (profile !== undefined) await rm(profile, { recursive: true, force: true });
    });

    const text = (selector: string): Promise<string | null> =>
      page.evaluate((s: string) => document.querySelector(s)?.textContent?.trim() ?? null, selector);
    const waitForText = async (selector: string, expected: string): Promise<void> => {
      await page.waitForFunction(
        (s: string, e: string) => document.querySelector(s)?.textContent?.trim() === e,
        { timeout: 30_000, polling: 100 },
        selector,
        expected,
      );
    };

    it('lists the batch with its state, counts and progress, and shows its failed job and that job’s status', async () => {
      await page.goto(`http://127.0.0.1:${server.port}/`, { waitUntil: 'domcontentloaded' });
      // The tabs come with the page's first answer from the broker.
      await page.waitForSelector('button[data-view="batches"]', { timeout: 30_000 });
      await page.click('button[data-view="batches"]');
      const row = 'tr[data-batch="scan-api"]';
      await page.waitForSelector(row, { timeout: 30_000 });
      expect(await text(`${row} [data-field="tenant"]`)).to.equal('acme');
      expect(await text(`${row} [data-field="state"]`)).to.equal('completed');
      expect(await text(`${row} [data-field="known"]`)).to.equal('8');
      expect(await text(`${row} [data-field="completed"]`)).to.equal('7');
      expect(await text(`${row} [data-field="failed"]`)).to.equal('1');
      expect(await text(`${row} [data-field="in_flight"]`)).to.equal('0');
      // The bar's parts are as wide as their shares (set through the CSSOM: the policy allows no inline styles).
      const widths = await page.$eval(`${row} [data-field="progress"]`, (bar) =>
        [...bar.children].map((part) => (part as unknown as { style: { width: string } }).style.width),
      );
      expect(widths).to.deep.equal(['87.5%', '12.5%', '0%']);
      // globex's batch is listed too; the filter leaves acme's.
      await page.waitForSelector('tr[data-batch="scan-fresh"]');
      await page.type('input[name="batch-filter"]', 'acme');
      await page.waitForFunction(() => document.querySelector('tr[data-batch="scan-fresh"]') === null, { timeout: 5000 });

      await page.click(`${row} button`);
      const details = '.details[data-batch="scan-api"]';
      await waitForText(`${details} [data-field="state"]`, 'completed');
      expect(await text(`${details} [data-field="known"]`)).to.equal('8');
      expect(await text(`${details} [data-field="dead"]`)).to.equal('1');
      expect(await text(`${details} [data-field="cancelled"]`)).to.equal('0');
      await page.waitForSelector('#failed-jobs li');
      expect(await text('#failed-jobs [data-field="error-type"]')).to.equal('UnreadableError');
      expect(await text('#failed-jobs [data-field="error-message"]')).to.equal('file 1 is unreadable');
      expect(await text('#failed-jobs [data-field="type"]')).to.equal('file');
      expect(await text('#failed-jobs [data-field="where"]')).to.equal('reader / files');
      await page.click('#failed-jobs [data-action="job-status"]');
      // The OJS state of a dead-lettered job, and the outcome behind it (docs/job-state.md).
      await waitForText('#failed-jobs [data-field="job-state"]', 'discarded');
      expect(await text('#failed-jobs [data-field="outcome"]')).to.equal('dead');
      // The address keeps the view: a reload opens the batches again.
      await page.reload({ waitUntil: 'domcontentloaded' });
      await page.waitForSelector(row, { timeout: 30_000 });
      expect(problems, 'errors in the page').to.deep.equal([]);
    });

    it('follows a running batch as its jobs settle', async () => {
      sinkGate.close();
      await running.publisher.publish('scans', { type: 'scan', args: [1, null, 'hold'], tenant: 'acme', batch: 'scan-held' });
      const row = 'tr[data-batch="scan-held"]';
      await page.waitForSelector(row, { timeout: 30_000 });
      // 1 scan + 1 file done, 2 parts held by the sink.
      await waitForText(`${row} [data-field="in_flight"]`, '2');
      expect(await text(`${row} [data-field="state"]`)).to.equal('running');
      expect(await text(`${row} [data-field="known"]`)).to.equal('4');
      await waitFor('both parts held', () => sinkGate.held.length === 2);
      sinkGate.releaseAll();
      await waitForText(`${row} [data-field="state"]`, 'completed');
      expect(await text(`${row} [data-field="completed"]`)).to.equal('4');
      expect(problems, 'errors in the page').to.deep.equal([]);
    });

    it('pauses, resumes and cancels a running batch from its details, and a wrong token changes nothing', async () => {
      const waitForMatch = async (selector: string, expected: RegExp): Promise<string> => {
        await page.waitForFunction(
          (s: string, source: string) => new RegExp(source).test(document.querySelector(s)?.textContent?.trim() ?? ''),
          { timeout: 30_000, polling: 100 },
          selector,
          expected.source,
        );
        return (await text(selector))!;
      };
      const waitForGone = (selector: string): Promise<unknown> =>
        page.waitForFunction((s: string) => document.querySelector(s) === null, { timeout: 30_000, polling: 100 }, selector);
      const apiBatch = async (): Promise<Json> => (await get('/ojs/v1/batches/scan-dash')).body;
      const stagesSee = (verdict: string): Promise<unknown> =>
        waitFor(
          `the stages to see ${verdict}`,
          async () => (await running.group.directives.verdict({ tenant: 'acme', meta: { batch: 'scan-dash' } })) === verdict,
        );

      // A running batch: 1 scan + 1 file done, its 2 parts held by the sink.
      sinkGate.close();
      await running.publisher.publish('scans', { type: 'scan', args: [1, null, 'hold'], tenant: 'acme', batch: 'scan-dash' });
      await waitFor('both parts held', () => sinkGate.held.length === 2, 30_000);
      const row = 'tr[data-batch="scan-dash"]';
      await page.waitForSelector(row, { timeout: 30_000 });
      await page.click(`${row} button`);
      const details = '.details[data-batch="scan-dash"]';
      await waitForText(`${details} [data-field="state"]`, 'running');
      expect(await page.$(`${details} [data-field="directive"]`)).to.equal(null);
      expect(await page.$(`${details} button[data-action="resume"]`)).to.equal(null);
      expect(await page.$eval(`${details} button[data-action="cancel"]`, (b) => (b as unknown as { disabled: boolean }).disabled)).to.equal(
        false,
      );

      // A wrong token: the confirmation names the batch, the server refuses, the page says so, nothing changes.
      await page.evaluate(() => sessionStorage.removeItem('stagecoach.admin-token'));
      await page.click(`${details} button[data-action="cancel"]`);
      await page.waitForSelector('.dialog input[name="token"]');
      expect(await text('#confirm-title')).to.equal('Cancel batch scan-dash?');
      expect(await text('.dialog p')).to.match(/scan-dash not started yet are discarded/);
      await page.type('.dialog input[name="token"]', 'not-the-token');
      await page.click('.dialog button[name="confirm"]');
      expect(await waitForMatch('[data-field="notice"]', /^Refused/)).to.contain('UNAUTHORIZED');
      expect(await apiBatch()).to.deep.include({ state: 'running', cancelled: false, paused: false });
      expect(await text(`${details} [data-field="state"]`)).to.equal('running');
      expect(await page.$(`${details} [data-field="directive"]`)).to.equal(null);
      await page.click('button[name="forget-token"]');

      // Pause, with the token typed in the confirmation: the details and the list say paused, and so does the API.
      await page.click(`${details} button[data-action="pause"]`);
      await page.waitForSelector('.dialog input[name="token"]');
      expect(await text('#confirm-title')).to.equal('Pause batch scan-dash?');
      await page.type('.dialog input[name="token"]', 'batch-status-token');
      await page.click('.dialog button[name="confirm"]');
      await waitForText('[data-field="notice"]', 'batch scan-dash: paused');
      await waitForText(`${details} [data-field="directive"]`, 'paused');
      await waitForText(`${row} [data-field="directive"]`, 'paused');
      expect((await apiBatch()).paused).to.equal(true);
      await page.waitForSelector(`${details} button[data-action="resume"]`);
      expect(await page.$(`${details} button[data-action="pause"]`)).to.equal(null);

      // A second root arrives while paused: parked at the scanner, unrun.
      await stagesSee('park-batch');
      await running.publisher.publish('scans', { type: 'scan', args: [1], tenant: 'acme', batch: 'scan-dash' });
      await waitFor(
        'the late root parked',
        async () =>
          (await running.raw.count(running.names.parked)) === 1 &&
          (await get('/ojs/v1/batches/scan-dash/jobs?state=parked')).body.total === 1,
        30_000,
      );

      // Resume (the token is kept: no field this time) sends it on, and says so.
      await page.click(`${details} button[data-action="resume"]`);
      await page.waitForSelector('.dialog button[name="confirm"]');
      expect(await page.$('.dialog input[name="token"]')).to.equal(null);
      await page.click('.dialog button[name="confirm"]');
      await waitForText('[data-field="notice"]', 'batch scan-dash: resumed, 1 parked job sent on');
      await waitForGone(`${details} [data-field="directive"]`);
      await waitForGone(`${row} [data-field="directive"]`);
      expect((await apiBatch()).paused).to.equal(false);
      await page.waitForSelector(`${details} button[data-action="pause"]`);
      // The late root runs: its file and 2 parts complete; the 2 held parts are still in flight.
      await waitForText(`${details} [data-field="completed"]`, '6');
      expect(await text(`${details} [data-field="state"]`)).to.equal('running');

      // Cancel, confirmed: cancelled while the held parts finish, then the batch ends cancelled.
      await page.click(`${details} button[data-action="cancel"]`);
      await page.waitForSelector('.dialog button[name="confirm"]');
      await page.click('.dialog button[name="confirm"]');
      await waitForText('[data-field="notice"]', 'batch scan-dash: cancelled, 0 parked jobs sent on');
      await waitForText(`${details} [data-field="directive"]`, 'cancelled');
      expect(await apiBatch()).to.deep.include({ state: 'running', cancelled: true });
      const disabled = (action: string): Promise<boolean> =>
        page.$eval(`${details} button[data-action="${action}"]`, (b) => (b as unknown as { disabled: boolean }).disabled);
      expect(await disabled('cancel')).to.equal(true);
      expect(await disabled('pause')).to.equal(true);
      sinkGate.releaseAll();
      await waitForText(`${details} [data-field="state"]`, 'cancelled');
      await waitForText(`${row} [data-field="state"]`, 'cancelled');
      // Its state badge says it: no second badge.
      expect(await page.$(`${details} [data-field="directive"]`)).to.equal(null);
      expect((await apiBatch()).state).to.equal('cancelled');
      expect(await disabled('cancel')).to.equal(true);
      expect(problems, 'errors in the page').to.deep.equal([]);
    });
  });
});
