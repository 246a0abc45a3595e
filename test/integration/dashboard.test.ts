import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import amqplib from 'amqplib';
import { expect } from 'chai';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { viewerToken } from '../../src/http-api/tenant-tokens.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { held } from '../fixtures/test-stages.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

/** Debian's chromium: `.ci/run` installs it. Never a browser downloaded by a library. */
const CHROMIUM = '/usr/bin/chromium';
const TEST_STAGES_MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/test-stages.js');
const STAGES = [
  { name: 'fanout', input: 'jobs', outputs: ['in'] },
  { name: 'relay', input: 'in', outputs: ['out'] },
] as unknown as StageMetadata[];
const TOKEN = 'dashboard-test-token-5f1e';
const authed = { authorization: `Bearer ${TOKEN}` };
/** The management plugin samples every 5 s, and answers slowly when the broker is busy: what the page shows lags. */
const SAMPLED_MS = 40_000;

// The page's globals, as the callbacks evaluated in the browser use them (tests compile without the DOM library).
declare const document: { querySelector(selector: string): { textContent: string | null } | null };
declare const sessionStorage: { removeItem(key: string): void; getItem(key: string): string | null };
declare const location: { hash: string };

const log = createLogger({ test: 'dashboard' }, 'error');

/** The text of the first element matching `selector` in the page, or null. */
async function textOf(page: Page, selector: string): Promise<string | null> {
  return page.evaluate((s: string) => document.querySelector(s)?.textContent?.trim() ?? null, selector);
}

/** Waits until the element's text satisfies `expected` (bounded), and returns it. */
async function waitForText(page: Page, selector: string, expected: string | RegExp, timeout = SAMPLED_MS): Promise<string> {
  await page.waitForFunction(
    (s: string, source: string, isRegExp: boolean) => {
      const text = document.querySelector(s)?.textContent?.trim();
      return text !== undefined && (isRegExp ? new RegExp(source).test(text) : text === source);
    },
    { timeout, polling: 100 },
    selector,
    typeof expected === 'string' ? expected : expected.source,
    typeof expected !== 'string',
  );
  return (await textOf(page, selector)) ?? '';
}

/** Consumers of a queue now (a passive declare), not the plugin's sample. */
async function consumers(queue: string): Promise<number> {
  const connection = await amqplib.connect(AMQP_URL);
  try {
    return (await (await connection.createChannel()).checkQueue(queue)).consumerCount;
  } finally {
    await connection.close();
  }
}

const cell = (tenant: string, queue: string): string => `td[data-tenant="${tenant}"][data-queue="${queue}"]`;

describe('the web dashboard, in a headless browser', function () {
  this.timeout(240_000);
  let project: ConfigFile;
  let running: RunningGroup;
  let server: AdminServer;
  let browser: Browser;
  let profile: string;
  let page: Page;

  before(async () => {
    // A missing browser fails the run with what to do, never skips the test.
    if (!existsSync(CHROMIUM)) {
      throw new Error(`no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium), as .ci/run does`);
    }
    project = await writeConfigFile(
      {
        tenants: ['acme', 'globex'],
        // Flow limits: `in`'s own (each tenant's queue a partition) and a named one the relay takes.
        queues: { jobs: { scope: 'shared' }, in: { concurrency: 5, rate_limit: { limit: 50, period: 'PT1S' } }, out: {} },
        limits: { 'relay-api': { concurrency: 4 } },
        stages: { fanout: { module: TEST_STAGES_MODULE }, relay: { module: TEST_STAGES_MODULE, limits: ['relay-api'] } },
      },
      STAGES,
      'dashboard',
    );
    // A running pipeline: the relay consumes acme's `in`; nothing consumes globex's, `out` or `jobs`.
    running = await startGroup(project.config, [{ stage: 'relay', tenant: 'acme' }], log);
    const { names, raw } = project;
    const { publisher } = running;
    for (let i = 0; i < 2; i++) await publisher.publish('in', { type: 'relay.me', args: [`g${i}`], tenant: 'globex' });
    await publisher.publish('jobs', { type: 'fan', args: ['shared'] });
    // A real failure: the relay refuses it without retry, so it is dead-lettered with its error.
    await publisher.publish('in', { type: 'relay.me', args: ['doomed', 'fatal'], tenant: 'acme' });
    // Three jobs relayed to acme's `out`, where no stage reads.
    for (let i = 0; i < 3; i++) await publisher.publish('in', { type: 'relay.me', args: [`a${i}`], tenant: 'acme' });
    // A tenant nobody provisioned: kept in unroutable, and the producer told.
    const lost = await publisher.publish('in', { type: 'relay.me', args: ['lost'], tenant: 'initech' }).catch((err: unknown) => err);
    expect(lost).to.include({ code: 'UNROUTABLE', reason: 'tenant-not-provisioned' });
    await waitFor('the dead letter, the relayed jobs and the unroutable job', async () => {
      return (
        (await raw.count(names.deadQueue('in', 'acme'))) === 1 &&
        (await raw.count(names.queue('out', 'acme'))) === 3 &&
        (await raw.count(names.unroutable)) === 1
      );
    });

    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL } });
    profile = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-chromium-'));
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      userDataDir: profile,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1500, height: 1000 });
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(String(err)));
    page.on('console', (message) => {
      if (message.type() === 'error' && !message.text().includes('401')) problems.push(message.text());
    });
    // The server has an admin token, so the page asks for a token before it shows anything: a viewer's.
    await page.goto(`http://127.0.0.1:${server.port}/`, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('input[name="read-token"]', { timeout: SAMPLED_MS });
    expect(await page.$('#matrix')).to.equal(null);
    await page.type('input[name="read-token"]', viewerToken(TOKEN, project.config.prefix, 'ops'));
    await page.click('button[name="sign-in"]');
    await page.waitForSelector('#matrix', { timeout: SAMPLED_MS });
    expect(problems, 'errors in the page').to.deep.equal([]);
  });

  after(async () => {
    held.open = true;
    await browser?.close();
    if (profile !== undefined) await rm(profile, { recursive: true, force: true });
    await server?.close();
    await running?.stop();
    await project?.remove();
  });

  it('lists the tenants and the queues of the running pipeline with the depths the broker reports', async () => {
    const { names, raw } = project;
    // The page, its modules and its libraries come from the admin server itself, under a strict policy.
    const index = await fetch(`http://127.0.0.1:${server.port}/`);
    expect(index.headers.get('content-type')).to.match(/^text\/html/);
    expect(index.headers.get('content-security-policy')).to.contain("default-src 'none'").and.to.contain("script-src 'self' 'sha256-");
    for (const file of ['app.js', 'style.css', 'vendor/preact.mjs', 'vendor/preact-hooks.mjs', 'vendor/htm.mjs']) {
      expect((await fetch(`http://127.0.0.1:${server.port}/dashboard/${file}`)).status, file).to.equal(200);
    }

    // Rows: the configured tenants; columns: the tenant-scoped queues in pipeline order; shared apart.
    await page.waitForSelector('tr[data-row="acme"]');
    const rows = await page.$$eval('tr[data-row]', (trs) => trs.map((tr) => tr.getAttribute('data-row')));
    expect(rows).to.deep.equal(['acme', 'globex']);
    const columns = await page.$$eval('#matrix thead .queue-name', (ths) => ths.map((th) => th.textContent));
    expect(columns).to.deep.equal(['in', 'out']);
    const shared = await page.$$eval('.shared thead .queue-name', (ths) => ths.map((th) => th.textContent));
    expect(shared).to.deep.equal(['jobs']);

    // The depths, as the page shows them once sampled, are the broker's.
    const depths: Array<[string, string, string]> = [
      [cell('acme', 'out'), names.queue('out', 'acme'), 'ready'],
      [cell('globex', 'in'), names.queue('in', 'globex'), 'ready'],
      [cell('', 'jobs'), names.queue('jobs'), 'ready'],
    ];
    for (const [selector, queue] of depths) {
      const broker = await raw.count(queue);
      expect(await waitForText(page, `${selector} [data-field="ready"]`, String(broker))).to.equal(String(broker));
    }
    expect(await raw.count(names.queue('out', 'acme'))).to.equal(3);
    await waitForText(page, `${cell('acme', 'in')} [data-field="consumers"]`, /^1\b/);
    await waitForText(page, `${cell('globex', 'in')} [data-field="consumers"]`, /^0\b/);
    await waitForText(page, `${cell('acme', 'in')} [data-field="dead"]`, /1$/);
    await waitForText(page, '#unroutable [data-field="unroutable-count"]', '1');
    expect(await textOf(page, '#unroutable tbody')).to.contain('initech');
  });

  it('searches jobs by tenant, state, type and id from the job store, as GET /ojs/v1/jobs lists them, each opening its job page', async () => {
    const listed = async (query: string): Promise<string[]> => {
      const response = await fetch(`http://127.0.0.1:${server.port}/ojs/v1/jobs?${query}`, {
        headers: { accept: 'application/json', authorization: `Bearer ${TOKEN}` },
      });
      return ((await response.json()) as { jobs: Array<{ id: string }> }).jobs.map((job) => job.id);
    };
    // The store (the admin server's stream follower) knows globex's two waiting jobs and acme's dead one.
    const waiting = await waitFor('the waiting globex jobs in the store', async () => {
      const ids = await listed('tenant=globex&state=available');
      return ids.length === 2 && ids;
    });
    const [doomed] = await waitFor('the dead-lettered job in the store', async () => {
      const ids = await listed('tenant=acme&state=discarded&type=relay.me');
      return ids.length === 1 && ids;
    });
    try {
      await searchJobs(waiting, doomed as string);
    } finally {
      // The next cases start from the queues view.
      await page.goto(`http://127.0.0.1:${server.port}/`, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector('#matrix', { timeout: SAMPLED_MS });
    }
  });

  async function searchJobs(waiting: string[], doomed: string): Promise<void> {
    const ids = async (): Promise<string[]> =>
      page.$$eval('#job-results tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-job') ?? ''));
    /** Types into a search field as a person does (cleared with the keyboard: the page reads input events). */
    const fill = async (name: string, value: string): Promise<void> => {
      const selector = `#job-search [name="${name}"]`;
      await page.click(selector, { count: 3 });
      await page.keyboard.press('Backspace');
      if (value !== '') await page.type(selector, value);
    };
    await page.click('button[data-view="jobs"]');
    await page.waitForSelector('#job-search');
    await fill('job-tenant', 'globex');
    await page.select('#job-search [name="job-state"]', 'available');
    await page.click('#job-search button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#job-results tbody tr') !== null, { timeout: 10_000 });
    expect(await ids()).to.deep.equal(waiting);
    expect(await page.$$eval('#job-results [data-field="tenant"]', (tds) => tds.map((td) => td.textContent))).to.deep.equal([
      'globex',
      'globex',
    ]);

    // By type and state across tenants: the one dead-lettered job; its link opens its job page.
    await fill('job-tenant', '');
    await fill('job-type', 'relay.me');
    await page.select('#job-search [name="job-state"]', 'discarded');
    await page.click('#job-search button[type="submit"]');
    await waitForText(page, '#job-results tbody tr [data-field="state"]', 'discarded', 10_000);
    expect(await ids()).to.deep.equal([doomed]);
    await page.click(`#job-results tr[data-job="${doomed}"] a`);
    await waitForText(page, `[data-job-page="${doomed}"] [data-field="job-state"]`, 'discarded', 10_000);
    expect(await page.evaluate(() => location.hash)).to.equal(`#job=${doomed}`);

    // By id: an unknown id, none; that job's id, that job alone. The unknown id goes first: the
    // results of the search before (this same job) would otherwise pass for the id search's.
    await fill('job-type', '');
    await page.select('#job-search [name="job-state"]', '');
    await fill('job-id', '0190a0a0-0000-7000-8000-000000000000');
    await page.click('#job-search button[type="submit"]');
    await waitForText(page, '[data-field="jobs-none"]', 'no job matches', 10_000);
    await fill('job-id', doomed);
    await page.click('#job-search button[type="submit"]');
    await waitForText(page, '#job-results tbody tr [data-field="queue"]', 'in', 10_000);
    expect(await ids()).to.deep.equal([doomed]);
    // A link to the job page opens it on a fresh load.
    await page.goto('about:blank');
    await page.goto(`http://127.0.0.1:${server.port}/#job=${doomed}`, { waitUntil: 'domcontentloaded' });
    await waitForText(page, `[data-job-page="${doomed}"] [data-field="job-state"]`, 'discarded', SAMPLED_MS);
  }

  it("shows a queue's flow limits with the jobs running under them, and the named limits in the Limits list", async () => {
    const { names } = project;
    // acme's `in` ran jobs (its partition exists); nothing consumed globex's (none yet: a dash).
    await waitForText(page, `${cell('acme', 'in')} [data-field="limits"]`, '0/5 run 50/s');
    expect(await textOf(page, `${cell('globex', 'in')} [data-field="limits"]`)).to.equal('–/5 run 50/s');
    expect(await page.$(`${cell('acme', 'out')} [data-field="limits"]`), 'a queue without limits').to.equal(null);
    await waitForText(page, '#limits tr[data-key="relay-api"] [data-field="concurrency"]', '0/4');

    // A job held running: one token of each concurrency limit it holds, as the broker counts them.
    held.open = false;
    await running.publisher.publish('in', { type: 'relay.me', args: ['held', 'hold'], tenant: 'acme' });
    await waitFor('the relay holding its job', () => held.active === 1);
    await waitForText(page, `${cell('acme', 'in')} [data-field="limits"]`, '1/5 run 50/s');
    await waitForText(page, '#limits tr[data-key="relay-api"] [data-field="concurrency"]', '1/4');
    expect(await textOf(page, '#limits [data-field="limits-count"]')).to.equal('1');
    await page.click(`${cell('acme', 'in')} button`);
    await waitForText(page, '.details [data-field="limits"]', '1/5 run 50/s');
    expect(await textOf(page, '.details .stats')).to.contain(`queue:${names.queue('in', 'acme')}`);

    held.open = true;
    await waitFor('the held job done', () => held.active === 0);
    await waitForText(page, '#limits tr[data-key="relay-api"] [data-field="concurrency"]', '0/4');
  });

  it('refuses an action without the token, and says so', async () => {
    const { names, raw } = project;
    await page.evaluate(() => sessionStorage.removeItem('stagecoach.admin-token'));
    await page.click(`${cell('acme', 'in')} button`);
    await page.waitForSelector('#dead-letters li', { timeout: SAMPLED_MS });
    await page.click('.details [data-action="retry"]');
    // The page asks for the token in its confirmation; confirmed without one, the server refuses.
    await page.waitForSelector('.dialog input[name="token"]');
    await page.click('.dialog button[name="confirm"]');
    const notice = await waitForText(page, '[data-field="notice"]', /^Refused/);
    expect(notice).to.contain('UNAUTHORIZED');
    expect(await raw.count(names.deadQueue('in', 'acme'))).to.equal(1);

    // A wrong token is refused as well, and forgotten on request.
    await page.click('.details [data-action="retry"]');
    await page.type('.dialog input[name="token"]', 'not-the-token');
    await page.click('.dialog button[name="confirm"]');
    // Waits for this refusal's own notice: the previous one ("Refused: ... changes state") is
    // still shown until the answer arrives, and matching /^Refused/ alone could read it.
    expect(await waitForText(page, '[data-field="notice"]', /^Refused.*not valid/)).to.contain('not valid');
    expect(await raw.count(names.deadQueue('in', 'acme'))).to.equal(1);
    await page.click('button[name="forget-token"]');
    expect(await page.evaluate(() => sessionStorage.getItem('stagecoach.admin-token'))).to.equal(null);
  });

  it('shows a dead letter with its error and attempt, and retrying it from the page moves it back to its queue', async () => {
    const { names, raw } = project;
    const deadQueue = names.deadQueue('in', 'acme');
    const inQueue = names.queue('in', 'acme');
    await page.waitForSelector('#dead-letters li');
    expect(await textOf(page, '#dead-letters .error-type')).to.equal('RefusedError');
    expect(await textOf(page, '#dead-letters .error-message')).to.equal('refused doomed');
    expect(await textOf(page, '#dead-letters [data-field="attempt"]')).to.equal('1');
    await page.click('#dead-letters .body-toggle button');
    expect(await waitForText(page, '#dead-letters [data-field="body"] pre', /"doomed"/)).to.contain('"fatal"');

    // Pause acme's `in` first (the relay would take the retried job and kill it again): the
    // page asks for the token, keeps it for the session, and the runner stops consuming.
    await page.click('.details [data-action="pause"]');
    await page.type('.dialog input[name="token"]', TOKEN);
    await page.click('.dialog button[name="confirm"]');
    await waitForText(page, '[data-field="notice"]', 'acme / in: paused');
    expect(await page.evaluate(() => sessionStorage.getItem('stagecoach.admin-token'))).to.equal(TOKEN);
    await waitFor('the relay to stop consuming acme.in', async () => (await consumers(inQueue)) === 0);
    await waitForText(page, `${cell('acme', 'in')} [data-field="state"]`, 'paused');

    await page.click('.details [data-action="retry"]');
    // The token is kept: the confirmation asks for nothing more.
    expect(await page.$('.dialog input[name="token"]')).to.equal(null);
    await page.click('.dialog button[name="confirm"]');
    await waitForText(page, '[data-field="notice"]', /^1 retried/);
    expect(await raw.count(deadQueue)).to.equal(0);
    expect(await raw.count(inQueue)).to.equal(1);
    // And the page follows: the dead letter is gone from the cell, the job waits in the paused queue.
    await waitForText(page, `${cell('acme', 'in')} [data-field="ready"]`, '1');
    await page.waitForFunction(
      (s: string) => document.querySelector(s) === null,
      { timeout: SAMPLED_MS },
      `${cell('acme', 'in')} [data-field="dead"]`,
    );
  });
  it('shows what is not a job and what no queue took, replays unroutable and purges dead letters from the page', async () => {
    const { names, raw } = project;
    const base = `http://127.0.0.1:${server.port}`;
    // A dead letter that is not a job: no id, so the page names it by its position.
    const deadQueue = names.deadQueue('in', 'globex');
    await raw.publish('', deadQueue, 'not a job at all');
    const listed = (await (await fetch(`${base}/ojs/v1/queues/in/dead-letters?tenant=globex`, { headers: authed })).json()) as {
      dead_letters: Array<{ ref: string; is_job: boolean }>;
    };
    expect(listed.dead_letters).to.deep.equal([{ ...listed.dead_letters[0], ref: '~0', is_job: false }]);
    const letter = (await (await fetch(`${base}/ojs/v1/queues/in/dead-letters/~0?tenant=globex`, { headers: authed })).json()) as {
      body: string;
    };
    expect(letter.body).to.equal('not a job at all');
    // Unroutable by tenant, and one of them in full by its id.
    const unroutable = (await (await fetch(`${base}/ojs/v1/unroutable?tenant=initech`, { headers: authed })).json()) as {
      unroutable: Array<{ ref: string; queue: string; tenant: string }>;
    };
    expect(unroutable.unroutable.map(({ queue, tenant }) => ({ queue, tenant }))).to.deep.equal([{ queue: 'in', tenant: 'initech' }]);
    const lost = (await (await fetch(`${base}/ojs/v1/unroutable/${unroutable.unroutable[0].ref}`, { headers: authed })).json()) as {
      body_json: { args: unknown[] };
    };
    expect(lost.body_json.args).to.deep.equal(['lost']);
    // A missing queue is an OJS 404, not an internal error.
    const missing = await fetch(`${base}/ojs/v1/queues/in/dead-letters?tenant=initech`, { headers: authed });
    expect(missing.status).to.equal(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).to.equal('NOT_FOUND');

    // Replay from the page (the token is still kept): initech is not provisioned, so its job stays.
    await page.click('#unroutable [data-action="replay"]');
    await page.click('.dialog button[name="confirm"]');
    await waitForText(page, '[data-field="notice"]', '0 replayed, 1 kept');
    // The page reads the queue again after the replay (a read holds its messages a moment): the
    // kept job is counted once no reader holds it.
    await waitFor('the kept job in unroutable', async () => (await raw.count(names.unroutable)) === 1, 10_000);

    // Purge globex's dead letters from the page.
    await page.click(`${cell('globex', 'in')} button`);
    await waitForText(page, '#dead-letters .type', '(not a job)');
    await page.click('#dead-letters .body-toggle button');
    await waitForText(page, '#dead-letters [data-field="body"] pre', 'not a job at all');
    await page.waitForSelector('.details [data-action="purge"]:not([disabled])');
    await page.click('.details [data-action="purge"]');
    await page.click('.dialog button[name="confirm"]');
    await waitForText(page, '[data-field="notice"]', '1 purged');
    expect(await raw.count(deadQueue)).to.equal(0);
  });
});
