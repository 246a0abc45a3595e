/**
 * Takes docs/dashboard.png: the dashboard of the example pipeline (config/pipeline.json, tenants
 * acme and globex) caught in a state worth looking at. `npm run docs:screenshot`.
 *
 * Runs the example stages in one process as `npm start` does, but not all of them, so that work
 * piles up where an operator would see it: globex's conversions are paused, no matcher runs for
 * globex and no exporter at all; a scan of a missing folder and a job of a type the converter does
 * not take are dead-lettered; a scan for a tenant nobody provisioned leaves its conversions in
 * unroutable. Then it serves `stagecoach admin` on a free port, opens the page in Debian's
 * chromium (headless, through puppeteer-core), selects acme's conversions and saves the page.
 *
 * Uses its own prefix (env STAGECOACH_PREFIX, default `stagecoach-demo-shot`) and removes its
 * topology at the end. Env: AMQP_URL, CHROMIUM (default /usr/bin/chromium), SCREENSHOT (output).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { startAdminServer } from '../src/http-api/admin-server.js';
import { createLogger, loadAllStages, loadConfig, Publisher, StageGroup } from '../src/index.js';
import { setQueueState } from '../src/queue-state/set-queue-state.js';
import { purge, teardown } from '../src/testing/index.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CONFIG_FILE = path.join(ROOT, 'config/pipeline.json');
const OUTPUT = path.resolve(process.env.SCREENSHOT ?? path.join(ROOT, 'docs/dashboard.png'));
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const TIMEOUT_MS = 60_000;

// The page's globals, as the callbacks evaluated in the browser use them (compiled without the DOM library).
declare const document: { querySelector(selector: string): { textContent: string | null } | null };

async function main(): Promise<void> {
  const env = { ...process.env, STAGECOACH_PREFIX: process.env.STAGECOACH_PREFIX ?? 'stagecoach-demo-shot' };
  const log = createLogger({ component: 'dashboard-screenshot' }, process.env.LOG_LEVEL ?? 'warn');
  const config = await loadConfig(CONFIG_FILE, env);
  const stages = await loadAllStages(config);
  const metadata = stages.map((stage) => stage.metadata);
  const stage = (name: string) => {
    const found = stages.find((s) => s.metadata.name === name);
    if (found === undefined) throw new Error(`no stage ${name} in ${CONFIG_FILE}`);
    return found;
  };
  await purge(config, metadata);
  const group = new StageGroup(
    config,
    [
      { stage: stage('explorer') },
      ...['acme', 'globex'].flatMap((tenant) => [
        { stage: stage('converter'), tenant },
        { stage: stage('converter'), tenant, variant: 'pdf' },
      ]),
      { stage: stage('matcher'), tenant: 'acme' },
    ],
    log,
  );
  const profile = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-chromium-'));
  try {
    await group.start(true);
    await setQueueState(config, { queue: 'conversions', tenant: 'globex' }, 'paused', log);
    const publisher = await Publisher.connect(config, { log });
    try {
      for (const tenant of config.tenants) await publisher.publish('scan-specs', { type: 'scan.folder', args: [tenant], tenant });
      await publisher.publish('scan-specs', { type: 'scan.folder', args: ['archive-2019'], tenant: 'acme' });
      await publisher.publish('conversions', { type: 'doc.ocr', args: ['scans/page-01.tiff'], tenant: 'acme' });
      await publisher.publish('scan-specs', { type: 'scan.folder', args: ['acme'], tenant: 'initech' });
    } finally {
      await publisher.close();
    }

    const server = await startAdminServer({ configFile: CONFIG_FILE, port: 0, token: 'screenshot', log, env, stages: metadata });
    const browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      userDataDir: profile,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    try {
      const page = await browser.newPage();
      await page.setViewport({ width: 1440, height: 900, deviceScaleFactor: 1 });
      await page.goto(`http://127.0.0.1:${server.port}/`, { waitUntil: 'domcontentloaded' });
      // The management plugin samples every 5 s: wait until the page shows what was set up.
      await page.waitForFunction(
        () => {
          const text = (selector: string) => document.querySelector(selector)?.textContent?.trim() ?? '';
          return (
            text('td[data-tenant="acme"][data-queue="conversions"] [data-field="dead"]') !== '' &&
            text('td[data-tenant=""][data-queue="scan-specs"] [data-field="dead"]') !== '' &&
            /^[1-9]/.test(text('td[data-tenant="globex"][data-queue="conversions"] [data-field="ready"]')) &&
            /^[1-9]/.test(text('td[data-tenant=""][data-queue="matches"] [data-field="ready"]')) &&
            /^[1-9]/.test(text('#unroutable [data-field="unroutable-count"]'))
          );
        },
        { timeout: TIMEOUT_MS, polling: 250 },
      );
      await page.click('td[data-tenant="acme"][data-queue="conversions"] button');
      await page.waitForSelector('#dead-letters li', { timeout: TIMEOUT_MS });
      await page.click('#dead-letters .body-toggle button');
      await page.waitForSelector('#dead-letters [data-field="body"] pre', { timeout: TIMEOUT_MS });
      await page.screenshot({ path: OUTPUT as `${string}.png`, fullPage: true });
      console.log(`dashboard screenshot saved to ${OUTPUT}`);
    } finally {
      await browser.close();
      await server.close();
    }
  } finally {
    await group.stop();
    await teardown(config, metadata);
    await rm(profile, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`dashboard screenshot failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
