#!/usr/bin/env node
// Fails when a source file grows past its folder's bound: 400 lines in src/, 300 in src/runner/
// (the runner is read most, and split by role). A file already past its bound is listed below
// with the size it had when the guard came: it may shrink, never grow, until it is split.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const BOUNDS = [
  ['src/runner/', 300],
  ['src/', 400],
];
/** Files past their bound, at most this long until split. */
const CEILINGS = {
  'src/runner/fair-share.ts': 334,
  'src/runner/dispatcher.ts': 325,
};

function* files(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) yield* files(full);
    else if (entry.name.endsWith('.ts')) yield full;
  }
}

const failures = [];
for (const file of files('src')) {
  const lines = readFileSync(file, 'utf8').split('\n').length - 1;
  const bound = CEILINGS[file] ?? BOUNDS.find(([prefix]) => file.startsWith(prefix))[1];
  if (lines > bound) failures.push(`${file}: ${lines} lines, over its bound of ${bound}${CEILINGS[file] ? ' (split it)' : ''}`);
}
if (failures.length > 0) {
  console.error(`file sizes:\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log('file sizes: every file within its bound');
