import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { CompiledConfig, RawConfig } from '../../src/config/config.types.js';
import { createLogger } from '../../src/logging/logger.js';
import { Publisher } from '../../src/publisher/publisher.js';
import { devInstances, StageGroup } from '../../src/runner/stage-group.js';
import { loadAllStages, type LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/test-config.js';
import { closeConnections } from '../helpers/broker-admin.js';
import { waitFor } from '../helpers/wait-for.js';

const CONFIG_FILE = fileURLToPath(new URL('../../../config/pipeline.json', import.meta.url));
const SAMPLE = fileURLToPath(new URL('../../../stages/samples/acme/contacts.txt', import.meta.url));
const JOBS = 10_000;
const log = createLogger({ test: 'reconnect' }, 'error');

/** Documents seen per tenant in the exporter's results, and how many lines repeated one. */
async function tally(dir: string): Promise<{ distinct: number; duplicates: number }> {
  let distinct = 0;
  let lines = 0;
  for (const tenant of ['acme', 'globex']) {
    const text = await readFile(path.join(dir, `${tenant}.jsonl`), 'utf8').catch(() => '');
    const seen = new Set<string>();
    for (const line of text.split('\n')) {
      if (!line) continue;
      lines++;
      seen.add((JSON.parse(line) as { document: string }).document);
    }
    distinct += seen.size;
  }
  return { distinct, duplicates: lines - distinct };
}

describe('resilient connections (broker)', function () {
  this.timeout(240_000);
  let config: CompiledConfig;
  let stages: LoadedStage[];
  let group: StageGroup;
  let resultsDir: string;

  before(async () => {
    resultsDir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-reconnect-'));
    const raw = JSON.parse(await readFile(CONFIG_FILE, 'utf8')) as RawConfig;
    const stagesConfig = raw.stages ?? {};
    config = withTestConfig(
      {
        ...raw,
        // Reconnect fast so the test is about behaviour, not about waiting.
        broker: { ...raw.broker, reconnect: { initialDelay: 0.2, maxDelay: 1 } },
        stages: {
          ...stagesConfig,
          converter: { ...stagesConfig.converter, module: stagesConfig.converter?.module ?? '', concurrency: 32, prefetch: 200 },
          matcher: { ...stagesConfig.matcher, module: stagesConfig.matcher?.module ?? '', concurrency: 32, prefetch: 200 },
          exporter: {
            ...stagesConfig.exporter,
            module: stagesConfig.exporter?.module ?? '',
            concurrency: 16,
            prefetch: 200,
            options: { resultsDir },
          },
        },
      },
      CONFIG_FILE,
    );
    stages = await loadAllStages(config);
    group = new StageGroup(config, devInstances(config, stages), log);
    await group.start(true);
  });

  after(async () => {
    await group.stop();
    await teardown(
      config,
      stages.map((s) => s.metadata),
    );
    await rm(resultsDir, { recursive: true, force: true });
  });

  it('delivers all 10,000 jobs while the broker closes every connection three times, and keeps consuming', async () => {
    const publisher = await Publisher.connect(config, { log });
    const published: Promise<string>[] = [];
    for (let i = 0; i < JOBS; i++) {
      const tenant = i % 2 === 0 ? 'acme' : 'globex';
      published.push(
        publisher.publish('conversions', {
          type: 'doc.convert',
          args: [SAMPLE, `doc-${i}.txt`],
          tenant,
          headers: { mime: 'text/plain' },
          meta: { scan_id: 'r', scan_total: JOBS / 2 },
        }),
      );
    }
    await Promise.all(published);
    await publisher.close();

    let closed = 0;
    for (const [i, milestone] of [1500, 4000, 6500].entries()) {
      await waitFor(`${milestone} results`, async () => (await tally(resultsDir)).distinct >= milestone, 120_000);
      // Each close must hit a live connection: the one made after the previous close.
      await waitFor(`connection ${i + 1} up`, () => group.connections === i + 1 && group.readiness().ready, 30_000);
      closed += await closeConnections(`[${config.prefix}]`, 'test: forced close');
    }
    expect(closed, 'connections closed by the broker').to.be.at.least(3);

    const final = await waitFor(
      'all 10,000 results',
      async () => {
        const t = await tally(resultsDir);
        return t.distinct === JOBS && t;
      },
      180_000,
    );
    // The last close may come after the last result: the reconnection follows within its backoff.
    await waitFor('the last reconnection', () => group.connections === 4 && group.readiness().ready, 30_000);
    console.log(`      reconnects: ${group.connections - 1}, duplicates delivered: ${final.duplicates} of ${JOBS}`);
    expect(group.connections, 'one connection plus one per forced close').to.equal(4);
    expect(group.readiness()).to.deep.equal({ ready: true });

    // Still consuming: a new job goes all the way through.
    const again = await Publisher.connect(config, { log });
    await again.publish('conversions', {
      type: 'doc.convert',
      args: [SAMPLE, 'after.txt'],
      tenant: 'acme',
      headers: { mime: 'text/plain' },
    });
    await again.close();
    await waitFor(
      'the job published after the closes',
      async () => (await readFile(path.join(resultsDir, 'acme.jsonl'), 'utf8')).includes('"after.txt"'),
      30_000,
    );
  });
});
