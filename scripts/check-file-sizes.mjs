#!/usr/bin/env node
// Fails when a source file grows past its folder's bound: 400 lines in src/, 300 in src/runner/
// (the runner is read most, and split by role). No file is excused: one that grows past its bound
// is split by role.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const BOUNDS = [
  ['src/runner/', 300],
  ['src/', 400],
];

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
  const bound = BOUNDS.find(([prefix]) => file.startsWith(prefix))[1];
  if (lines > bound) failures.push(`${file}: ${lines} lines, over its bound of ${bound}: split it by role`);
}
if (failures.length > 0) {
  console.error(`file sizes:\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log('file sizes: every file within its bound');
