import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import puppeteer, { type Browser } from 'puppeteer-core';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { tenantToken } from '../../src/http-api/tenant-tokens.js';
import { createLogger } from '../../src/logging/logger.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { REPO_ROOT } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const log = createLogger({ test: 'workflows-http' }, 'error');
const TOKEN = 'test-workflows-http-token-0123456789';
const OJS = 'application/openjobspec+json';
const CHROMIUM = '/usr/bin/chromium';
const STAGES: StageMetadata[] = [
  { name: 'steps', input: 'steps', outputs: ['steps', 'leaves'] },
  { name: 'leaves', input: 'leaves', outputs: [] },
];
type Json = Record<string, unknown>;

// The page's globals, as the callbacks evaluated in the browser use them (tests compile without the DOM library).
declare const document: { querySelector(selector: string): { textContent: string | null } | null };

/** A workflow as the binding takes it (openapi.yaml WorkflowRequest), every job on the `steps` queue. */
const job = (type: string, args: unknown[] = [{}]) => ({ type, args, options: { queue: 'steps' } });

/**
 * Workflows over the admin port (docs/workflows.md, docs/http-binding.md): created, read and
 * cancelled with the binding's routes by the admin and by tenant tokens, each confined to its
 * tenant's workflows; and the dashboard's Workflows view showing a workflow as its steps.
 */
describe('workflows over HTTP and in the dashboard', function () {
  this.timeout(180_000);
  let project: ConfigFile;
  let running: RunningGroup;
  let server: AdminServer;
  let base: string;
  let acme: string;
  let globex: string;

  const call = async (method: string, route: string, token: string, body?: unknown): Promise<{ status: number; body: Json }> => {
    const response = await fetch(`${base}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, accept: OJS, ...(body === undefined ? {} : { 'content-type': OJS }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Json };
  };
  const workflowOf = (answer: { body: Json }) => answer.body.workflow as Json;

  before(async () => {
    const module = path.join(REPO_ROOT, 'dist/test/fixtures/workflow-stages.js');
    project = await writeConfigFile(
      { tenants: ['acme', 'globex'], stages: { steps: { module }, leaves: { module } } },
      STAGES,
      'workflows-http',
    );
    // acme's steps run; globex's wait (nothing consumes them).
    running = await startGroup(project.config, [{ stage: 'steps', tenant: 'acme' }], log);
    server = await startAdminServer({ configFile: project.file, port: 0, token: TOKEN, log, env: { AMQP_URL } });
    base = `http://127.0.0.1:${server.port}`;
    acme = tenantToken(TOKEN, project.config.prefix, 'acme');
    globex = tenantToken(TOKEN, project.config.prefix, 'globex');
  });

  after(async () => {
    await server?.close();
    await running?.stop();
    await project?.remove().catch(() => undefined);
  });

  it("runs a tenant's chain to its end, each step given the result before, and answers it as openapi.yaml's Workflow", async () => {
    const created = await call('POST', '/ojs/v1/workflows', acme, {
      type: 'chain',
      name: 'acme-two',
      steps: [job('first', [{ result: { n: 7 } }]), job('second')],
    });
    expect(created.status).to.equal(201);
    const id = workflowOf(created).id as string;
    expect(workflowOf(created)).to.include({ type: 'chain', tenant: 'acme', steps_total: 2 });
    // Answered once its first step is out: acme's steps may have run to the end by then.
    expect(workflowOf(created).state).to.be.oneOf(['running', 'completed']);
    const done = await waitFor('the chain completed', async () => {
      const now = workflowOf(await call('GET', `/ojs/v1/workflows/${id}`, acme));
      return now.state === 'completed' ? now : undefined;
    });
    expect(done).to.include({ steps_completed: 2 });
    const steps = done.steps as Json[];
    expect(steps.map((s) => s.state)).to.deep.equal(['completed', 'completed']);
    expect(steps[1]?.result).to.deep.equal({ step: 'second', parents: [{ n: 7 }] });
  });

  it("confines a tenant token to its own tenant's workflows: another's is 404 to read, to cancel and absent from lists", async () => {
    const created = await call('POST', '/ojs/v1/workflows', globex, { type: 'group', jobs: [job('a'), job('b')] });
    expect(created.status).to.equal(201);
    const id = workflowOf(created).id as string;
    expect(workflowOf(created)).to.include({ tenant: 'globex', jobs_total: 2 });
    expect((await call('GET', `/ojs/v1/workflows/${id}`, acme)).status).to.equal(404);
    expect((await call('DELETE', `/ojs/v1/workflows/${id}`, acme)).status).to.equal(404);
    const listed = (await call('GET', '/ojs/v1/workflows', acme)).body.workflows as Json[];
    expect(listed.length).to.be.above(0);
    expect(listed.every((w) => w.tenant === 'acme')).to.equal(true);
    expect((await call('GET', '/ojs/v1/workflows?tenant=globex', acme)).status).to.equal(403);
    // Its own tenant cancels it: what has not started never will; a second cancel is a conflict.
    const cancelled = await call('DELETE', `/ojs/v1/workflows/${id}`, globex);
    expect(cancelled.status).to.equal(200);
    expect(workflowOf(cancelled).state).to.equal('cancelled');
    expect((await call('DELETE', `/ojs/v1/workflows/${id}`, globex)).status).to.equal(409);
    // The admin sees both tenants'.
    const all = (await call('GET', '/ojs/v1/workflows', TOKEN)).body.workflows as Json[];
    expect(new Set(all.map((w) => w.tenant))).to.deep.equal(new Set(['acme', 'globex']));
  });

  it("refuses the binding's depends_on graph and a step outside the configuration, saying why", async () => {
    const graph = await call('POST', '/ojs/v1/workflows', acme, { name: 'g', steps: [{ id: 'a', type: 'x.y', args: [], depends_on: [] }] });
    expect(graph.status).to.equal(400);
    expect((graph.body.error as Json).message).to.match(/depends_on/);
    const empty = await call('POST', '/ojs/v1/workflows', acme, { type: 'chain', steps: [] });
    expect(empty.status).to.equal(400);
    expect((empty.body.error as Json).message).to.match(/"steps" must be a non-empty array/);
  });

  it('shows a workflow as its steps, each with its state, in the dashboard', async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium)`);
    const created = await call('POST', '/ojs/v1/workflows', acme, {
      type: 'chain',
      name: 'shown',
      steps: [job('shown.first'), { type: 'group', jobs: [job('shown.a'), job('shown.b', [{ fail: true }])] }, job('shown.never')],
    });
    const id = workflowOf(created).id as string;
    await waitFor('the workflow failed', async () => workflowOf(await call('GET', `/ojs/v1/workflows/${id}`, TOKEN)).state === 'failed');
    const profile = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-chromium-'));
    let browser: Browser | undefined;
    try {
      browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, userDataDir: profile, args: ['--no-sandbox'] });
      const page = await browser.newPage();
      await page.goto(`${base}/`, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector('input[name="read-token"]', { timeout: 40_000 });
      await page.type('input[name="read-token"]', TOKEN);
      await page.click('button[name="sign-in"]');
      await page.waitForSelector('button[data-view="workflows"]', { timeout: 40_000 });
      await page.click('button[data-view="workflows"]');
      await page.waitForSelector(`tr[data-workflow="${id}"] button`, { timeout: 30_000 });
      await page.click(`tr[data-workflow="${id}"] button`);
      const state = (selector: string) =>
        page
          .waitForFunction((s: string) => document.querySelector(s)?.textContent?.trim() ?? null, { timeout: 30_000 }, selector)
          .then((h) => h.jsonValue());
      expect(await state('section[aria-label="workflow details"] h2 [data-field="state"]')).to.equal('failed');
      expect(await state('li[data-step="0"] > .step-head [data-field="state"]')).to.equal('completed');
      expect(await state('li[data-step="1"] > .step-head [data-field="state"]')).to.equal('failed');
      expect(await state('li[data-step="1.0"] > .step-head [data-field="state"]')).to.equal('completed');
      expect(await state('li[data-step="1.1"] > .step-head [data-field="state"]')).to.equal('failed');
      expect(await state('li[data-step="1.1"] [data-field="error"]')).to.match(/StepFailed/);
      expect(await state('li[data-step="2"] > .step-head [data-field="state"]')).to.equal('cancelled');
    } finally {
      await browser?.close();
      await rm(profile, { recursive: true, force: true });
    }
  });
});
