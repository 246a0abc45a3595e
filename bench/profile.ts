/**
 * Where the client's CPU goes, per side: reads a V8 CPU profile of a benchmark run and its
 * `--json` output, and sums the profile samples that fall inside each side's measured rounds
 * (baseline and stagecoach, or the peers scenario's sides) (the rounds carry their time window on the profile's clock).
 *
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof dist/bench/index.js --only relay --json > /tmp/bench.json
 *   node dist/bench/profile.js /tmp/prof/CPU.*.cpuprofile /tmp/bench.json [--top 25]
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
type Rounds = Array<{ side: string; jobs: number; windowUs: [number, number] }>;
interface BenchJson {
  throughput: Array<{ scenario: string; rounds: Rounds }>;
  /** The peers scenario: its sides' rounds, per part. */
  peers?: { relay: Array<{ rounds: Rounds }>; pipeline: Array<{ rounds: Rounds }> };
}

const { positionals, values } = parseArgs({ allowPositionals: true, options: { top: { type: 'string' } } });
const [profilePath, jsonPath] = positionals;
if (!profilePath || !jsonPath) {
  process.stderr.write('usage: node dist/bench/profile.js <file.cpuprofile> <bench --json output> [--top N]\n');
  process.exit(2);
}
const top = Number(values.top ?? 25);
const profile = JSON.parse(readFileSync(profilePath, 'utf8')) as Profile;
const bench = JSON.parse(readFileSync(jsonPath, 'utf8')) as BenchJson;

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

function where(node: ProfileNode): string {
  const { url, lineNumber } = node.callFrame;
  if (!url) return '';
  const marker = url.includes('/node_modules/')
    ? url.slice(url.lastIndexOf('/node_modules/') + 14)
    : url.replace(/^file:\/\/.*?\/dist\//, '');
  return `${marker.startsWith('node:') ? marker : path.normalize(marker)}:${lineNumber + 1}`;
}

function category(node: ProfileNode): string {
  const { url, functionName } = node.callFrame;
  if (!url) return functionName || '(native)';
  if (url.includes('/node_modules/')) return url.slice(url.lastIndexOf('/node_modules/') + 14).split('/')[0] as string;
  if (url.includes('/dist/src/')) return 'stagecoach src/';
  if (url.includes('/dist/bench/')) return 'bench/';
  if (url.startsWith('node:')) return 'node core';
  return 'other';
}

function label(node: ProfileNode): string {
  return `${node.callFrame.functionName || '(anonymous)'} ${where(node)}`;
}

const scenarios = [...bench.throughput];
if (bench.peers) {
  for (const part of ['relay', 'pipeline'] as const)
    scenarios.push({ scenario: `peers ${part}`, rounds: bench.peers[part].flatMap((row) => row.rounds) });
}
for (const scenario of scenarios) {
  for (const side of new Set(scenario.rounds.map((r) => r.side))) {
    const windows = scenario.rounds.filter((r) => r.side === side).map((r) => r.windowUs);
    const jobs = scenario.rounds.filter((r) => r.side === side).reduce((sum, r) => sum + r.jobs, 0);
    const self = new Map<string, number>();
    const inclusive = new Map<string, number>();
    const categories = new Map<string, number>();
    let total = 0;
    let t = profile.startTime;
    for (let i = 0; i < profile.samples.length; i++) {
      t += profile.timeDeltas[i] as number;
      const weight = (profile.timeDeltas[i + 1] as number | undefined) ?? 0;
      if (!windows.some(([a, b]) => t >= a && t <= b)) continue;
      const node = byId.get(profile.samples[i] as number) as ProfileNode;
      if (node.callFrame.functionName === '(idle)') continue;
      total += weight;
      self.set(label(node), (self.get(label(node)) ?? 0) + weight);
      categories.set(category(node), (categories.get(category(node)) ?? 0) + weight);
      const seen = new Set<string>();
      for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
        const frame = byId.get(id) as ProfileNode;
        if (!frame.callFrame.url.includes('/dist/')) continue;
        const key = label(frame);
        if (seen.has(key)) continue;
        seen.add(key);
        inclusive.set(key, (inclusive.get(key) ?? 0) + weight);
      }
    }
    if (total === 0) continue;
    const ms = (us: number): string => (us / 1000).toFixed(0).padStart(7);
    const pct = (us: number): string => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
    const perJob = (us: number): string => `${(us / jobs).toFixed(1).padStart(6)} µs/job`;
    process.stdout.write(
      `\n== ${scenario.scenario} / ${side}: ${(total / 1000).toFixed(0)} ms busy CPU in ${windows.length} rounds, ${jobs} jobs, ${(total / jobs).toFixed(1)} µs/job\n`,
    );
    process.stdout.write('-- by origin (self time)\n');
    for (const [name, us] of [...categories].sort((a, b) => b[1] - a[1]).slice(0, 12))
      process.stdout.write(`${ms(us)} ms ${pct(us)} ${perJob(us)}  ${name}\n`);
    process.stdout.write(`-- top ${top} functions (self time)\n`);
    for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
      process.stdout.write(`${ms(us)} ms ${pct(us)} ${perJob(us)}  ${name}\n`);
    process.stdout.write(`-- top ${top} project functions (inclusive time)\n`);
    for (const [name, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top))
      process.stdout.write(`${ms(us)} ms ${pct(us)} ${perJob(us)}  ${name}\n`);
  }
}
