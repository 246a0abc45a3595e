#!/usr/bin/env node
// Fails when the folders under src/ import each other in a cycle (madge only sees file cycles).
// A folder is the first path segment below src/; files directly in src/ are the public surface
// (index.ts) and may import any folder.
import madge from 'madge';

const graph = (await madge('src', { fileExtensions: ['ts'] })).obj();
const folderOf = (file) => (file.includes('/') ? file.split('/')[0] : undefined);
const edges = new Map();
const why = new Map();
for (const [file, deps] of Object.entries(graph)) {
  const from = folderOf(file);
  if (from === undefined) continue;
  for (const dep of deps) {
    const to = folderOf(dep);
    if (to === undefined || to === from) continue;
    if (!edges.has(from)) edges.set(from, new Set());
    edges.get(from).add(to);
    const key = `${from} -> ${to}`;
    if (!why.has(key)) why.set(key, `${file} -> ${dep}`);
  }
}

// Tarjan's strongly connected components: a component of more than one folder is a cycle.
let index = 0;
const stack = [];
const state = new Map();
const cycles = [];
function visit(node) {
  state.set(node, { index, low: index, onStack: true });
  index++;
  stack.push(node);
  for (const next of edges.get(node) ?? []) {
    if (!state.has(next)) {
      visit(next);
      state.get(node).low = Math.min(state.get(node).low, state.get(next).low);
    } else if (state.get(next).onStack) {
      state.get(node).low = Math.min(state.get(node).low, state.get(next).index);
    }
  }
  if (state.get(node).low === state.get(node).index) {
    const component = [];
    let member;
    do {
      member = stack.pop();
      state.get(member).onStack = false;
      component.push(member);
    } while (member !== node);
    if (component.length > 1) cycles.push(component);
  }
}
for (const node of edges.keys()) if (!state.has(node)) visit(node);

if (cycles.length === 0) {
  console.log(`folder cycles: none among ${edges.size} folders`);
} else {
  for (const component of cycles) {
    console.error(`folder cycle: ${component.sort().join(', ')}`);
    for (const [key, example] of why) {
      const [from, to] = key.split(' -> ');
      if (component.includes(from) && component.includes(to)) console.error(`  ${key}  (${example})`);
    }
  }
  process.exit(1);
}
