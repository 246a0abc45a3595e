import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { createLogger, devInstances, loadAllStages, Publisher, StageGroup, type CompiledConfig, type RawConfig } from '../../src/index.js';
import type { LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/index.js';
import type { ResultLine } from '../../stages/exporter.stage.js';
import { readScanResults, scanComplete } from '../../stages/lib/results.js';
import { waitFor } from '../helpers/wait-for.js';

const CONFIG_FILE = fileURLToPath(new URL('../../../config/pipeline.json', import.meta.url));

/** What the bundled samples contain, document by document (see stages/samples). */
const EXPECTED: Record<string, Record<string, { kind: string; value: string }[]>> = {
  acme: {
    'contacts.txt': [
      { kind: 'email', value: 'alice.jensen@acme.example' },
      { kind: 'national_id', value: '010190-1234' },
      { kind: 'email', value: 'bob.hansen@acme.example' },
      { kind: 'national_id', value: '1502851234' },
    ],
    'invoice.html': [
      { kind: 'email', value: 'billing@tomandjerry.example' },
      { kind: 'card', value: '**** **** **** 1111' },
    ],
    'notes.md': [],
    'payroll.csv': [
      { kind: 'email', value: 'carl.jensen@acme.example' },
      { kind: 'national_id', value: '290296-4321' },
      { kind: 'email', value: 'dorte@acme.example' },
    ],
    'report.pdf': [
      { kind: 'email', value: 'finance@acme.example' },
      { kind: 'card', value: '****-****-****-4444' },
      { kind: 'national_id', value: '311299-1001' },
    ],
  },
  globex: {
    'customers.json': [
      { kind: 'email', value: 'sales@globex.example' },
      { kind: 'card', value: '**** ****** *0005' },
      { kind: 'email', value: 'hank@globex.example' },
      { kind: 'card', value: '**** **** **** 0004' },
    ],
    'memo.txt': [
      { kind: 'email', value: 'hr@globex.example' },
      { kind: 'national_id', value: '250403-5678' },
    ],
    'orders.csv': [{ kind: 'card', value: '****-****-****-5100' }],
    'statement.pdf': [
      { kind: 'email', value: 'accounts@globex.example' },
      { kind: 'card', value: '**** **** **** 1881' },
      { kind: 'national_id', value: '070761-4285' },
    ],
  },
};

describe('example pipeline end to end (broker)', function () {
  this.timeout(60_000);
  let config: CompiledConfig | undefined;
  let stages: LoadedStage[] = [];
  let group: StageGroup | undefined;
  let resultsDir: string;
  const scans = new Map<string, string>();
  const resultsFile = (tenant: string) => path.join(resultsDir, `${tenant}.jsonl`);

  /** The tenant's complete scan, waited for with a bound. */
  const results = (tenant: string): Promise<ResultLine[]> =>
    waitFor(
      `every document of ${tenant}'s scan in ${resultsFile(tenant)}`,
      async () => {
        const lines = await readScanResults(resultsFile(tenant), scans.get(tenant) as string);
        return scanComplete(lines) && lines;
      },
      30_000,
    );

  before(async () => {
    resultsDir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-pipeline-'));
    const raw = JSON.parse(await readFile(CONFIG_FILE, 'utf8')) as RawConfig;
    const exporter = raw.stages?.exporter;
    if (!exporter) throw new Error(`${CONFIG_FILE} has no exporter stage`);
    exporter.options = { ...exporter.options, resultsDir };
    config = withTestConfig(raw, CONFIG_FILE);
    stages = await loadAllStages(config);
    const log = createLogger({ test: 'pipeline' }, process.env.LOG_LEVEL ?? 'warn');
    group = new StageGroup(config, devInstances(config, stages), log);
    await group.start(true);
    const publisher = await Publisher.connect(config, { log });
    try {
      for (const tenant of config.tenants) {
        scans.set(tenant, await publisher.publish('scan-specs', { type: 'scan.folder', args: [tenant], tenant }));
      }
    } finally {
      await publisher.close();
    }
  });

  after(async () => {
    await group?.stop();
    if (config)
      await teardown(
        config,
        stages.map((stage) => stage.metadata),
      );
    await rm(resultsDir, { recursive: true, force: true });
  });

  for (const tenant of Object.keys(EXPECTED)) {
    it(`writes exactly ${tenant}'s findings, one line per document, to ${tenant}.jsonl`, async () => {
      const lines = await results(tenant);
      expect(Object.fromEntries(lines.map((line) => [line.document, line.findings]))).to.deep.equal(EXPECTED[tenant]);
    });
  }

  it("keeps tenants apart: a tenant's file holds only its own scan and none of the other's values", async () => {
    await Promise.all([results('acme'), results('globex')]);
    for (const [tenant, other] of [
      ['acme', 'globex'],
      ['globex', 'acme'],
    ] as const) {
      const lines = (await readFile(resultsFile(tenant), 'utf8'))
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as ResultLine);
      expect(new Set(lines.map((line) => line.scan_id))).to.deep.equal(new Set([scans.get(tenant)]));
      const values = new Set(lines.flatMap((line) => line.findings.map((finding) => finding.value)));
      for (const finding of Object.values(EXPECTED[other] ?? {}).flat()) expect(values).not.to.include(finding.value);
    }
  });

  it("converts each tenant's PDF on its pdf variant queue and everything else on the general queue", async () => {
    await Promise.all([results('acme'), results('globex')]);
    const completed = (name: string) => group?.runners.find((runner) => runner.name === name)?.stats.completed;
    // A runner counts a job after its acknowledgement, which may trail the exporter's line by a moment.
    await waitFor('the converters to count their jobs', () => completed('converter/globex') === 3 || undefined, 5_000);
    expect(completed('converter/acme/pdf')).to.equal(1);
    expect(completed('converter/acme')).to.equal(4);
    expect(completed('converter/globex/pdf')).to.equal(1);
    expect(completed('converter/globex')).to.equal(3);
  });

  it('dead-letters nothing', async () => {
    await Promise.all([results('acme'), results('globex')]);
    expect(group?.runners.filter((runner) => runner.stats.deadLettered > 0).map((runner) => runner.name)).to.deep.equal([]);
  });
});
