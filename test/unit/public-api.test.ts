import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

/** The repository root (this file runs as dist/test/unit/...). */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

interface Manifest {
  exports: Record<string, string | { types: string; default: string }>;
}
const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Manifest;

/** The entries with code: `stagecoach`, `stagecoach/admin`, ... (not schema.json, package.json). */
const entries = Object.entries(manifest.exports).flatMap(([subpath, target]) => (typeof target === 'string' ? [] : [{ subpath, target }]));

describe('public API', () => {
  it('has an entry per audience, each a module under dist/src whose source opens by saying who it is for', async () => {
    expect(entries.map((e) => e.subpath).sort()).to.deep.equal(['.', './admin', './runtime', './testing', './wire']);
    for (const { subpath, target } of entries) {
      const module = (await import(path.join(ROOT, target.default))) as Record<string, unknown>;
      expect(Object.keys(module).length, subpath).to.be.above(0);
      const source = path.join(ROOT, target.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
      expect(readFileSync(source, 'utf8'), `${source} opens with a doc comment`).to.match(/^\/\*\*\n/);
    }
  });

  it('keeps wire internals, operator functions and runner pieces off the root entry, each on exactly one entry', async () => {
    const modules = new Map<string, Record<string, unknown>>();
    for (const { subpath, target } of entries)
      modules.set(subpath, (await import(path.join(ROOT, target.default))) as Record<string, unknown>);
    const where = (name: string) => [...modules].filter(([, m]) => name in m).map(([subpath]) => subpath);
    for (const name of ['toWire', 'fromWire', 'DELAY_LEVELS', 'delayTopology', 'queueTypeArguments', 'BrokerNames'])
      expect(where(name), name).to.deep.equal(['./wire']);
    for (const name of ['retireTenant', 'provisionBroker', 'startAdminServer', 'listDeadLetters'])
      expect(where(name), name).to.deep.equal(['./admin']);
    for (const name of ['StageRunner', 'IsolationGate', 'Tracker']) expect(where(name), name).to.deep.equal(['./runtime']);
    for (const name of ['Stage', 'Publisher', 'StageGroup', 'loadConfig', 'compileConfig', 'FsPayloadStore', 'NonRetryableError'])
      expect(where(name), name).to.deep.equal(['.']);
  });
});
