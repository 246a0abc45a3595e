import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import type { RawConfig } from '../../src/config/config.types.js';
import { runCli } from '../helpers/cli.js';
import { writeConfigFile, type ConfigFile } from '../helpers/config-file.js';
import { AMQP_URL } from '../helpers/raw-broker.js';

describe('stagecoach limits set', function () {
  this.timeout(60_000);
  let project: ConfigFile;

  before(async () => {
    project = await writeConfigFile({ tenants: ['acme'], limits: { ocr: { concurrency: 2 } }, stages: {} }, [], 'limits-set');
  });

  after(async () => {
    await project?.remove();
  });

  it('changes the file named by --config, written after the key as the usage says', async () => {
    const set = await runCli(['limits', 'set', 'ocr', '--concurrency', '8', '--rate', '50/PT1S', '--config', project.file], { AMQP_URL });
    expect(set.code, set.stderr).to.equal(0);
    expect(set.stdout).to.contain('limits.ocr = {"concurrency":8,"rate":{"limit":50,"period":"PT1S"}}');
    const file = JSON.parse(await readFile(project.file, 'utf8')) as RawConfig;
    expect(file.limits?.ocr).to.deep.equal({ concurrency: 8, rate: { limit: 50, period: 'PT1S' } });
  });
});
