import { readFileSync } from 'node:fs';

/**
 * The version of the installed package, from its package.json. This file runs as
 * `dist/src/util/package-version.js`, three folders below the package root (as any file of src/util/ does), in the repository,
 * in `node_modules/stagecoach` and in the image alike.
 */
export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof manifest.version === 'string' ? manifest.version : 'unknown';
}
