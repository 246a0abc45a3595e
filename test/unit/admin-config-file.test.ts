import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ConfigFile } from '../../src/http-api/config-file.js';

describe('the admin API configuration file', () => {
  let dir: string;
  let file: string;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'config-file-'));
    file = path.join(dir, 'stagecoach.json');
    await writeFile(file, JSON.stringify({ queues: { scans: { max_size: 10 } } }));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('compiles the file once while it is unchanged', async () => {
    const config = new ConfigFile(file, {});
    const first = await config.load();
    expect(await config.load()).to.equal(first);
  });

  it('sees an edit made in place, and one made by its own write', async () => {
    const config = new ConfigFile(file, {});
    const first = await config.load();
    await writeFile(file, JSON.stringify({ queues: { scans: { max_size: 2000 } } }));
    const edited = await config.load();
    expect(edited).not.to.equal(first);
    expect(edited.queues.get('scans')?.max_size).to.equal(2000);
    await config.write({ queues: { scans: { max_size: 3 } } });
    expect((await config.load()).queues.get('scans')?.max_size).to.equal(3);
  });
});
