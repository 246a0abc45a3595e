import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ConfirmPublisher } from '../../src/broker/confirm-publisher.js';
import { createLogger, devInstances, loadAllStages, Publisher, StageGroup, type CompiledConfig, type RawConfig } from '../../src/index.js';
import { createPayloadStore } from '../../src/payload/create-payload-store.js';
import type { PayloadStore } from '../../src/payload/payload-store.js';
import type { LoadedStage } from '../../src/stage/stage-loader.js';
import { teardown, withTestConfig } from '../../src/testing/index.js';
import { readScanResults, scanComplete } from '../../stages/lib/results.js';
import { waitFor } from '../helpers/wait-for.js';

const CONFIG_FILE = fileURLToPath(new URL('../../../config/pipeline.json', import.meta.url));
const MB = 1024 * 1024;

/**
 * Issue 15's document: 20 MB of text through the example pipeline (explorer, converter, matcher,
 * exporter), with the default threshold (1 MiB). The explorer sends the document's bytes, the
 * converter its text: both go by reference. No message on the wire is above the threshold, the
 * findings at the end of the document are found, and the store is empty once the scan completed.
 */
describe('a 20 MB document through the example pipeline, by reference (broker, fs store)', function () {
  this.timeout(120_000);
  let config: CompiledConfig | undefined;
  let stages: LoadedStage[] = [];
  let group: StageGroup | undefined;
  let store: PayloadStore | undefined;
  let dir: string;
  const largest = { bytes: 0 };
  const original = ConfirmPublisher.prototype.publish;

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-payload-pipeline-'));
    const samples = path.join(dir, 'samples', 'acme');
    await mkdir(samples, { recursive: true });
    // 20 MB of prose with one e-mail address at its very end, and a small document beside it.
    const filler = 'The quarterly figures were discussed at length. '.repeat(Math.ceil((20 * MB) / 48)).slice(0, 20 * MB);
    await writeFile(path.join(samples, 'big.txt'), `${filler}\nwrite to tail@acme.example\n`);
    await writeFile(path.join(samples, 'small.txt'), 'reach me at small@acme.example');
    const raw = JSON.parse(await readFile(CONFIG_FILE, 'utf8')) as RawConfig;
    raw.tenants = ['acme'];
    raw.stages!.explorer!.options = { samplesDir: path.join(dir, 'samples') };
    raw.stages!.exporter!.options = { resultsDir: path.join(dir, 'results') };
    raw.payloads = { store: { kind: 'fs', dir: path.join(dir, 'payloads') } };
    config = withTestConfig(raw, CONFIG_FILE);
    store = createPayloadStore(config);
    stages = await loadAllStages(config);
    ConfirmPublisher.prototype.publish = function (exchange, routingKey, content, options) {
      largest.bytes = Math.max(largest.bytes, content.length);
      return original.call(this, exchange, routingKey, content, options);
    };
    group = new StageGroup(config, devInstances(config, stages), createLogger({ test: 'payload-pipeline' }, 'warn'));
    await group.start(true);
  });

  after(async () => {
    ConfirmPublisher.prototype.publish = original;
    await group?.stop();
    await store?.close();
    if (config)
      await teardown(
        config,
        stages.map((stage) => stage.metadata),
      );
    await rm(dir, { recursive: true, force: true });
  });

  it('finds what is at the end of the document, sends no message above the threshold, and leaves the store empty', async () => {
    const publisher = await Publisher.connect(config!, { log: createLogger({ test: 'payload-pipeline' }, 'warn') });
    let scan: string;
    try {
      scan = await publisher.publish('scan-specs', { type: 'scan.folder', args: ['acme'], tenant: 'acme' });
    } finally {
      await publisher.close();
    }
    const lines = await waitFor(
      'both documents exported',
      async () => {
        const found = await readScanResults(path.join(dir, 'results', 'acme.jsonl'), scan);
        return scanComplete(found) && found;
      },
      90_000,
      250,
    );
    const byDocument = Object.fromEntries(lines.map((line) => [line.document, line.findings.map((finding) => finding.value)]));
    expect(byDocument).to.deep.equal({ 'big.txt': ['tail@acme.example'], 'small.txt': ['small@acme.example'] });
    expect(largest.bytes, 'the largest message sent to the broker').to.be.at.most(config!.payloads.threshold);
    // The explorer's 27 MB of base64 and the converter's 20 MB of text went by reference, and are gone.
    await waitFor('the store empty', async () => (await store!.count()) === 0, 10_000);
    expect(config!.queues.get('conversions')?.payload_threshold).to.equal(MB);
  });
});
