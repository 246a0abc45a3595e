import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { FsPayloadStore } from '../../src/payload/fs-payload-store.js';
import type { PayloadKey } from '../../src/payload/payload-store.js';
import { describeStoreContract } from '../helpers/store-contract.js';

const run = promisify(execFile);

let contractDir = '';
describeStoreContract(
  'FsPayloadStore',
  async () => new FsPayloadStore((contractDir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-payloads-')))),
  { cleanup: () => rm(contractDir, { recursive: true, force: true }) },
);

/** Sets a file's mtime (and atime) `seconds` in the past. */
async function age(file: string, seconds: number): Promise<void> {
  const when = new Date(Date.now() - seconds * 1000);
  await utimes(file, when, when);
}

describe('FsPayloadStore', () => {
  let dir: string;
  let store: FsPayloadStore;
  const key = (tenant = 'acme'): PayloadKey => ({ tenant, id: randomUUID() });

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-payloads-'));
    store = new FsPayloadStore(dir);
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('lays payloads out as <dir>/<tenant>/<id>.pending, then <id> once committed, with nothing else left behind', async () => {
    const ref = key();
    await store.put(ref, Buffer.from('["x"]'));
    expect(await readdir(path.join(dir, 'acme'))).to.deep.equal([`${ref.id}.pending`]);
    await store.commit(ref);
    expect(await readdir(path.join(dir, 'acme'))).to.deep.equal([ref.id]);
    expect(await readFile(path.join(dir, 'acme', ref.id), 'utf8')).to.equal('["x"]');
    const none = key('_');
    await store.put(none, Buffer.from('[]'));
    expect(await readdir(path.join(dir, '_'))).to.deep.equal([`${none.id}.pending`]);
    await store.delete(ref);
    expect(await readdir(path.join(dir, 'acme'))).to.deep.equal([]);
  });

  it('reads a committed payload another program wrote by the documented layout, and an upper-case id as its lower-case file', async () => {
    const id = randomUUID();
    await mkdir(path.join(dir, 'globex'));
    await writeFile(path.join(dir, 'globex', id), '["from python"]');
    expect((await store.get({ tenant: 'globex', id: id.toUpperCase() }))?.toString()).to.equal('["from python"]');
  });

  it('sweeps by file mtime: pending files older than pendingBefore, any file older than anyBefore, and temporary files left by a crash', async () => {
    const oldPending = key();
    const newPending = key();
    const oldCommitted = key('globex');
    const veryOldCommitted = key('_');
    for (const ref of [oldPending, newPending, oldCommitted, veryOldCommitted]) await store.put(ref, Buffer.from('[]'));
    for (const ref of [oldCommitted, veryOldCommitted]) await store.commit(ref);
    await age(path.join(dir, 'acme', `${oldPending.id}.pending`), 2 * 3600);
    await age(path.join(dir, 'globex', oldCommitted.id), 2 * 3600);
    await age(path.join(dir, '_', veryOldCommitted.id), 40 * 86400);
    const crashed = path.join(dir, 'acme', `.${randomUUID()}.0123abcd.tmp`);
    await writeFile(crashed, '["half');
    await age(crashed, 2 * 3600);
    const foreign = path.join(dir, 'acme', 'README');
    await writeFile(foreign, 'not a payload');
    await age(foreign, 100 * 86400);

    const hourAgo = new Date(Date.now() - 3600 * 1000);
    const monthAgo = new Date(Date.now() - 30 * 86400 * 1000);
    expect(await store.sweep(hourAgo, monthAgo)).to.equal(
      2,
      'the orphan and the payload past retention; a temporary file is not a payload',
    );
    expect(await store.get(oldPending)).to.equal(undefined);
    expect(await store.get(veryOldCommitted)).to.equal(undefined);
    expect(await store.get(newPending)).to.not.equal(undefined);
    expect(await store.get(oldCommitted), 'committed: only the retention takes it').to.not.equal(undefined);
    expect(await readdir(path.join(dir, 'acme'))).to.have.members([`${newPending.id}.pending`, 'README']);
  });

  it('keeps a payload committed during a sweep, and its mtime through the commit (the age is from put)', async () => {
    const ref = key();
    await store.put(ref, Buffer.from('[]'));
    await age(path.join(dir, 'acme', `${ref.id}.pending`), 7200);
    const before = (await stat(path.join(dir, 'acme', `${ref.id}.pending`))).mtimeMs;
    await store.commit(ref);
    expect((await stat(path.join(dir, 'acme', ref.id))).mtimeMs).to.equal(before);
    expect(await store.sweep(new Date(), new Date(Date.now() - 86400_000))).to.equal(0);
  });

  it('never reads or writes outside its directory, whatever the reference says', async () => {
    const outside = path.join(dir, 'outside');
    const inner = path.join(dir, 'store');
    const confined = new FsPayloadStore(inner);
    await mkdir(outside);
    const id = randomUUID();
    await writeFile(path.join(outside, id), 'secret');
    await writeFile(path.join(dir, id), 'secret');
    for (const ref of [
      { tenant: '../outside', id },
      { tenant: '..', id },
      { tenant: 'acme', id: `../../outside/${id}` },
      { tenant: '_', id: `../${id}` },
      { tenant: '/etc', id },
    ]) {
      const error = await confined.get(ref).then(
        () => undefined,
        (err: unknown) => err as { code?: string },
      );
      expect(error?.code, JSON.stringify(ref)).to.equal('INVALID_PAYLOAD');
      await confined.put(ref, Buffer.from('x')).catch(() => undefined);
      await confined.delete(ref).catch(() => undefined);
    }
    expect(await readFile(path.join(outside, id), 'utf8')).to.equal('secret');
    expect(await readFile(path.join(dir, id), 'utf8')).to.equal('secret');
    expect(await readdir(outside)).to.deep.equal([id]);
    expect(await confined.count()).to.equal(0);
  });

  it('ignores what is not a tenant folder (lost+found, dotfiles) when it counts and sweeps', async () => {
    await mkdir(path.join(dir, 'lost+found'));
    await writeFile(path.join(dir, 'lost+found', randomUUID()), 'x');
    await mkdir(path.join(dir, '.snapshot'));
    await writeFile(path.join(dir, '.snapshot', randomUUID()), 'x');
    await store.put(key(), Buffer.from('[]'));
    expect(await store.count()).to.equal(1);
    expect(await store.sweep(new Date(Date.now() + 60_000), new Date(Date.now() + 60_000))).to.equal(1);
    expect(await readdir(path.join(dir, 'lost+found'))).to.have.length(1);
  });

  it('answers for a directory that does not exist yet (no payload stored) and makes it at the first put', async () => {
    const later = new FsPayloadStore(path.join(dir, 'not', 'yet'));
    expect(await later.count()).to.equal(0);
    expect(await later.get(key())).to.equal(undefined);
    expect(await later.sweep(new Date(), new Date())).to.equal(0);
    await later.put(key(), Buffer.from('[]'));
    expect(await later.count()).to.equal(1);
  });

  it('never shows a reader a partial file while a large payload is being written', async () => {
    const ref = key();
    const data = Buffer.alloc(8 * 1024 * 1024, 7);
    const writing = store.put(ref, data);
    const seen: Array<number | undefined> = [];
    let done = false;
    const finished = writing.then(() => {
      done = true;
    });
    while (!done) seen.push((await store.get(ref))?.length);
    await finished;
    seen.push((await store.get(ref))?.length);
    expect(seen.filter((length) => length !== undefined && length !== data.length)).to.deep.equal([]);
    expect(seen.at(-1)).to.equal(data.length);
  });

  it('shares one directory between processes: two processes writing, committing and deleting at once', async function () {
    this.timeout(60_000);
    const module = pathToFileURL(path.resolve('dist/src/payload/fs-payload-store.js')).href;
    // Each process stores 50 payloads for two tenants, commits them, deletes every other one and sweeps orphans.
    const script = `
      const { FsPayloadStore } = await import(${JSON.stringify(module)});
      const { randomUUID } = await import('node:crypto');
      const store = new FsPayloadStore(process.argv[1]);
      const refs = Array.from({ length: 50 }, (_, i) => ({ tenant: i % 2 ? 'acme' : 'globex', id: randomUUID() }));
      await Promise.all(refs.map((ref) => store.put(ref, Buffer.from(JSON.stringify([ref.id])))));
      await Promise.all(refs.map((ref) => store.commit(ref)));
      await Promise.all(refs.filter((_, i) => i % 2 === 0).map((ref) => store.delete(ref)));
      await store.sweep(new Date(Date.now() - 3600_000), new Date(Date.now() - 86400_000));
      const kept = refs.filter((_, i) => i % 2 === 1);
      for (const ref of kept) {
        const data = await store.get(ref);
        if (data?.toString() !== JSON.stringify([ref.id])) throw new Error('lost ' + ref.id);
      }
      console.log(JSON.stringify(kept));
    `;
    const outputs = await Promise.all(
      [1, 2].map(() => run(process.execPath, ['--input-type=module', '-e', script, dir], { cwd: process.cwd() })),
    );
    const kept = outputs.flatMap((output) => JSON.parse(output.stdout) as PayloadKey[]);
    expect(kept).to.have.length(50);
    expect(await store.count()).to.equal(50);
    expect(await store.count('acme')).to.equal(50);
    for (const ref of kept) expect((await store.get(ref))?.toString()).to.equal(JSON.stringify([ref.id]));
    expect((await readdir(path.join(dir, 'acme'))).filter((name) => name.endsWith('.tmp') || name.endsWith('.pending'))).to.deep.equal([]);
  });
});
