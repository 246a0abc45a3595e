import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

/** The repository root (this file runs as dist/test/unit/...). */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

interface Manifest {
  name: string;
  files: string[];
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
}
const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Manifest;

/** `import ... from 'x'`, `import 'x'`, `import('x')`, `export ... from 'x'`, `require('x')`. */
const SPECIFIER = /(?:\bfrom\s+|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"]([^'"]+)['"]/g;
const BUILTIN = new Set(builtinModules);

/** The npm package a bare specifier names (`@scope/name` or `name`), or undefined for a path or a built-in. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return undefined;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  return BUILTIN.has(name) || name === manifest.name ? undefined : name;
}

/** The packages the source files under `folder` import. */
function importsUnder(folder: string): Set<string> {
  const found = new Set<string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (/\.(ts|js|mjs)$/.test(entry.name)) {
        for (const match of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
          const name = packageOf(match[1]);
          if (name !== undefined) found.add(name);
        }
      }
    }
  };
  walk(path.join(ROOT, folder));
  return found;
}

/** `ARG EXAMPLE_DEPENDENCIES="..."` of the Dockerfile: what the image adds for the example pipeline. */
function imageExampleDependencies(): string[] {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const match = /^ARG EXAMPLE_DEPENDENCIES="([^"]*)"$/m.exec(dockerfile);
  expect(match, 'the Dockerfile names the example dependencies in ARG EXAMPLE_DEPENDENCIES="..."').not.to.equal(null);
  return (match?.[1] ?? '').split(/\s+/).filter(Boolean).sort();
}

/**
 * `npm install stagecoach` installs `dependencies`: they must be the framework's own, not those
 * of the example pipeline under stages/ (pdf.js alone is 41 MB), nor leftovers nothing imports.
 */
describe('package dependencies', () => {
  // dashboard/ is the admin server's web page: the browser imports its libraries from this package's node_modules.
  const shipped = new Set([...importsUnder('src'), ...importsUnder('bin'), ...importsUnder('dashboard')]);
  const example = importsUnder('stages');

  it('lists as dependencies exactly the packages the shipped code (src/, bin/, dashboard/) imports', () => {
    expect(Object.keys(manifest.dependencies).sort()).to.deep.equal([...shipped].sort());
    expect(
      manifest.files.filter((entry) => entry.includes('stages')),
      'the example is not shipped',
    ).to.deep.equal([]);
  });

  it('keeps what only the example pipeline (stages/) imports out of dependencies: a pinned devDependency the image installs', () => {
    const exampleOnly = [...example].filter((name) => !shipped.has(name)).sort();
    expect(exampleOnly, 'the example has dependencies of its own').to.include('pdfjs-dist');
    for (const name of exampleOnly) {
      expect(manifest.dependencies, name).not.to.have.property(name);
      expect(manifest.devDependencies[name], `${name}: an exact version in devDependencies`).to.match(/^\d+\.\d+\.\d+$/);
    }
    expect(imageExampleDependencies()).to.deep.equal(exampleOnly);
  });
});
