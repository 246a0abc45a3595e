import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, utimes } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import puppeteer from 'puppeteer-core';
import { startAdminServer, type AdminServer } from '../../src/http-api/admin-server.js';
import { MAX_BODY_BYTES } from '../../src/dashboard/peek-message.js';
import { createLogger } from '../../src/logging/logger.js';
import { FsPayloadStore } from '../../src/payload/fs-payload-store.js';
import type { PayloadKey } from '../../src/payload/payload-store.js';
import type { StageMetadata } from '../../src/stage/stage.types.js';
import { finished, REPO_ROOT, runCli, spawnCli, type CliResult } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';
import { startGroup, type RunningGroup } from '../helpers/running-group.js';
import { waitFor } from '../helpers/wait-for.js';

const TEST_STAGES_MODULE = path.join(REPO_ROOT, 'dist/test/fixtures/test-stages.js');
const STAGES = [{ name: 'relay', input: 'in', outputs: ['out'] }] as unknown as StageMetadata[];
const THRESHOLD = 1024;
const log = createLogger({ test: 'payload-admin' }, 'error');
const HOUR = 3600;

// The page's globals, as the callbacks evaluated in the browser use them (tests compile without the DOM library).
declare const document: { querySelectorAll(selector: string): { length: number } };
declare const sessionStorage: { setItem(key: string, value: string): void };
const DAY = 24 * HOUR;

interface PayloadView {
  ref: string;
  size: number | null;
  stored: boolean;
  args?: unknown[];
  truncated?: boolean;
}

describe('payload administration: sweep, dead letters and the admin API', function () {
  this.timeout(120_000);
  let project: ConfigFile;
  let store: FsPayloadStore;
  const env = { AMQP_URL };
  const cli = (...args: string[]): Promise<CliResult> => runCli([...args, '--config', project.file], env);

  /** Stores a payload (committed unless told otherwise) and dates its file `ageSeconds` back, as the sweep reads it. */
  async function stored(ageSeconds: number, commit: boolean, tenant = 'acme'): Promise<PayloadKey> {
    const key = { tenant, id: randomUUID() };
    await store.put(key, Buffer.from('["old"]'));
    if (commit) await store.commit(key);
    const file = fileOf(key, !commit);
    const then = new Date(Date.now() - ageSeconds * 1000);
    await utimes(file, then, then);
    return key;
  }
  const fileOf = (key: PayloadKey, pending = false): string => path.join(store.dir, key.tenant, `${key.id}${pending ? '.pending' : ''}`);

  before(async () => {
    project = await writeConfigFile(
      {
        tenants: ['acme'],
        queues: { in: { payload_threshold: THRESHOLD }, out: {} },
        stages: { relay: { module: TEST_STAGES_MODULE } },
        payloads: { store: { kind: 'fs', dir: './payloads' }, orphan_after: 'PT1H', retention: 'P50D' },
      },
      STAGES,
      'payload-admin',
    );
    store = new FsPayloadStore(path.join(project.dir, 'payloads'));
  });

  after(async () => {
    await store?.close();
    await project?.remove();
  });

  it('`payloads sweep` deletes pending payloads past orphan_after and any past retention, and `payloads count` counts', async () => {
    const orphan = await stored(2 * HOUR, false);
    const young = await stored(60, true);
    const youngPending = await stored(60, false); // its publisher may still be waiting for the confirm
    const waiting = await stored(2 * HOUR, true); // committed: its job may still be queued
    const expired = await stored(51 * DAY, true, '_');

    const counted = await cli('payloads', 'count', '--json');
    expect(counted.code, counted.stderr).to.equal(0);
    expect(JSON.parse(counted.stdout)).to.deep.equal({ count: 5 });
    expect((await cli('payloads', 'count', '--tenant', 'acme')).stdout).to.equal('4\n');
    expect(JSON.parse((await cli('payloads', 'count', '--tenant', '_', '--json')).stdout)).to.deep.equal({ tenant: '_', count: 1 });
    const badTenant = await cli('payloads', 'count', '--tenant', 'Not A Slug');
    expect(badTenant.code).to.equal(2);

    const swept = await cli('payloads', 'sweep', '--json');
    expect(swept.code, swept.stderr).to.equal(0);
    const result = JSON.parse(swept.stdout) as { swept: number; pending_before: string; any_before: string };
    expect(result.swept).to.equal(2);
    const pendingCut = Date.parse(result.pending_before);
    expect(Date.now() - pendingCut).to.be.within(HOUR * 1000, HOUR * 1000 + 60_000);
    expect(Date.now() - Date.parse(result.any_before)).to.be.within(50 * DAY * 1000, 50 * DAY * 1000 + 60_000);

    expect(existsSync(fileOf(orphan, true)), 'the orphan').to.equal(false);
    expect(existsSync(fileOf(expired)), 'past retention').to.equal(false);
    expect(existsSync(fileOf(young)), 'a young committed payload').to.equal(true);
    expect(existsSync(fileOf(youngPending, true)), 'a young pending payload').to.equal(true);
    expect(existsSync(fileOf(waiting)), 'an old committed payload within retention').to.equal(true);

    const again = await cli('payloads', 'sweep');
    expect(again.stdout).to.equal('swept 0\n');
    expect((await cli('payloads', 'count')).stdout).to.equal('3\n');
    for (const key of [young, youngPending, waiting]) await store.delete(key);
  });

  it('`stagecoach admin` sweeps the store, unless --no-payload-sweep', async () => {
    for (const sweep of [false, true]) {
      const orphan = await stored(2 * HOUR, false);
      const admin = spawnCli(['admin', '--port', '0', ...(sweep ? [] : ['--no-payload-sweep']), '--config', project.file], env);
      try {
        // Logged after the sweeper would have started, on the same stream.
        await waitFor('the admin API listening', () => admin.err.includes('admin API listening'), 30_000);
        if (sweep) {
          expect(admin.err).to.contain('payload sweeper started');
          await waitFor('the orphan swept', () => !existsSync(fileOf(orphan, true)));
        } else {
          expect(admin.err).not.to.contain('payload sweeper started');
          expect(existsSync(fileOf(orphan, true))).to.equal(true);
          await store.delete(orphan);
        }
      } finally {
        admin.kill('SIGTERM');
        expect((await finished(admin, 15_000, 'admin')).code).to.equal(0);
      }
    }
  });

  describe('dead letters of jobs sent by reference', () => {
    let running: RunningGroup;
    let server: AdminServer | undefined;
    /** Job id -> its size class. */
    const jobs: Record<'small' | 'large' | 'gone', string> = { small: '', large: '', gone: '' };

    before(async () => {
      running = await startGroup(project.config, [{ stage: 'relay', tenant: 'acme' }], log);
      // The relay refuses these without retry: each is dead-lettered with its reference, and its payload stays.
      jobs.small = await running.publisher.publish('in', { type: 'relay.me', args: ['doomed', 'fatal', 'x'.repeat(2000)], tenant: 'acme' });
      jobs.large = await running.publisher.publish('in', {
        type: 'relay.me',
        args: ['huge', 'fatal', 'y'.repeat(MAX_BODY_BYTES + 1000)],
        tenant: 'acme',
      });
      jobs.gone = await running.publisher.publish('in', { type: 'relay.me', args: ['lost', 'fatal', 'z'.repeat(2000)], tenant: 'acme' });
      await waitFor('three dead letters', async () => (await project.raw.count(project.names.deadQueue('in', 'acme'))) === 3, 30_000);
    });

    after(async () => {
      await server?.close();
      await running?.stop();
    });

    it('`dead list` shows each payload reference, its size and whether it is still stored', async () => {
      const listed = await cli('dead', 'list', 'in', '--tenant', 'acme', '--json');
      expect(listed.code, listed.stderr).to.equal(0);
      const entries = JSON.parse(listed.stdout) as Array<{ id: string; errorType: string; payload?: PayloadView }>;
      expect(entries.map((e) => e.id)).to.deep.equal([jobs.small, jobs.large, jobs.gone]);
      for (const entry of entries) {
        expect(entry.errorType).to.equal('RefusedError');
        expect(entry.payload?.ref).to.match(/^acme\/[0-9a-f-]{36}$/);
        expect(entry.payload?.stored).to.equal(true);
      }
      const [small, , gone] = entries as Array<{ payload: PayloadView }>;
      expect(small.payload.size).to.equal(Buffer.byteLength(JSON.stringify(['doomed', 'fatal', 'x'.repeat(2000)])));

      // One payload lost (deleted by hand here; a sweep past retention in life): the list says so.
      const [tenant, id] = gone.payload.ref.split('/') as [string, string];
      await store.delete({ tenant, id });
      const again = JSON.parse((await cli('dead', 'list', 'in', '--tenant', 'acme', '--json')).stdout) as Array<{ payload: PayloadView }>;
      expect(again.map((e) => e.payload.stored)).to.deep.equal([true, true, false]);

      const table = (await cli('dead', 'list', 'in', '--tenant', 'acme')).stdout.split('\n');
      expect(table[0]).to.contain(jobs.small).and.to.contain(`payload ${small.payload.ref} ${small.payload.size} B stored`);
      expect(table[2])
        .to.contain(jobs.gone)
        .and.to.contain(`payload ${gone.payload.ref}`)
        .and.to.match(/ missing$/);
    });

    it('the admin API sweeps at start, lists dead letters with their payload and peeks at one with its arguments loaded back', async () => {
      const orphan = await stored(2 * HOUR, false);
      server = await startAdminServer({ configFile: project.file, port: 0, token: 'payload-admin-token', log, env });
      await waitFor('the sweep at start', () => !existsSync(fileOf(orphan, true)));
      const base = `http://127.0.0.1:${server.port}/ojs/v1/queues/in/dead-letters`;

      const list = (await (await fetch(`${base}?tenant=acme`, { headers: { authorization: 'Bearer payload-admin-token' } })).json()) as {
        dead_letters: Array<{ id: string; payload: PayloadView | null }>;
      };
      expect(list.dead_letters.map((d) => [d.id, d.payload?.stored])).to.deep.equal([
        [jobs.small, true],
        [jobs.large, true],
        [jobs.gone, false],
      ]);

      const small = (await (
        await fetch(`${base}/${jobs.small}?tenant=acme`, { headers: { authorization: 'Bearer payload-admin-token' } })
      ).json()) as {
        body_json: { args: unknown[] };
        payload: PayloadView;
      };
      expect(small.body_json.args, 'the message itself carries no arguments').to.deep.equal([]);
      expect(small.payload).to.include({ stored: true });
      expect(small.payload.args).to.deep.equal(['doomed', 'fatal', 'x'.repeat(2000)]);

      const large = (await (
        await fetch(`${base}/${jobs.large}?tenant=acme`, { headers: { authorization: 'Bearer payload-admin-token' } })
      ).json()) as { payload: PayloadView };
      expect(large.payload).to.include({ stored: true, truncated: true });
      expect(large.payload.size).to.be.above(MAX_BODY_BYTES);
      expect(large.payload).not.to.have.property('args');

      const gone = (await (
        await fetch(`${base}/${jobs.gone}?tenant=acme`, { headers: { authorization: 'Bearer payload-admin-token' } })
      ).json()) as { payload: PayloadView };
      expect(gone.payload).to.deep.include({ stored: false });
      expect(gone.payload).not.to.have.property('args');
    });

    it("the dashboard shows a dead job's arguments loaded from the store, or that they are gone", async () => {
      expect(server, 'the admin server of the previous test').not.to.equal(undefined);
      const profile = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-chromium-'));
      const browser = await puppeteer.launch({
        executablePath: '/usr/bin/chromium', // Debian's, as .ci/run installs it (see dashboard.test.ts)
        headless: true,
        userDataDir: profile,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
      });
      try {
        const page = await browser.newPage();
        await page.evaluateOnNewDocument(() => sessionStorage.setItem('stagecoach.read-token', 'payload-admin-token'));
        await page.goto(`http://127.0.0.1:${server!.port}/`, { waitUntil: 'domcontentloaded' });
        await page.waitForSelector('td[data-tenant="acme"][data-queue="in"] button', { timeout: 40_000 });
        await page.click('td[data-tenant="acme"][data-queue="in"] button');
        await page.waitForFunction(() => document.querySelectorAll('#dead-letters .body-toggle button').length === 3, { timeout: 40_000 });
        // One at a time (two peeks of one queue at once take each other's messages), each clicked
        // in the page: a handle taken first can be replaced by the panel's next refresh.
        for (const [index, opened] of [
          [0, 1],
          [2, 2],
        ] as const) {
          await page.$$eval(
            '#dead-letters .body-toggle button',
            (buttons, i) => (buttons[i] as unknown as { click(): void }).click(),
            index,
          );
          await page.waitForFunction(
            (n) => document.querySelectorAll('#dead-letters [data-field="payload"]').length === n,
            { timeout: 20_000 },
            opened,
          );
        }
        const shown = await page.$$eval('#dead-letters [data-field="payload"]', (els) => els.map((el) => el.textContent ?? ''));
        expect(shown[0]).to.contain('arguments sent by reference').and.to.contain('"doomed"').and.to.contain('xxxx');
        expect(shown[1]).to.contain('no longer has it');
      } finally {
        await browser.close();
        await rm(profile, { recursive: true, force: true });
      }
    });
  });
});
