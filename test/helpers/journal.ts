import { readFile } from 'node:fs/promises';

/** One line of a flow fixture's journal (test/fixtures/flow-stages.ts). */
export interface JournalEntry {
  what: 'start' | 'end';
  at: number;
  pid: number;
  tenant: string;
  job: string;
  attempt: number;
}

export async function readJournal(file: string): Promise<JournalEntry[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      const [what, at, pid, tenant, job, attempt] = line.split(' ');
      return { what: what as 'start' | 'end', at: Number(at), pid: Number(pid), tenant, job, attempt: Number(attempt) };
    })
    .sort((a, b) => a.at - b.at || (a.what === 'end' ? -1 : 1));
}

/** Most handlers running at once, over the whole journal (an end at the same ms as a start counts first). */
export function peakActive(entries: readonly JournalEntry[]): number {
  let active = 0;
  let peak = 0;
  for (const entry of entries) {
    active += entry.what === 'start' ? 1 : -1;
    peak = Math.max(peak, active);
  }
  return peak;
}

/** Handlers running at time `at`. */
export function activeAt(entries: readonly JournalEntry[], at: number): number {
  let active = 0;
  for (const entry of entries) {
    if (entry.at > at) break;
    active += entry.what === 'start' ? 1 : -1;
  }
  return active;
}

/** Most starts in any window of `windowMs` (sliding over every start). */
export function peakStartsPerWindow(entries: readonly JournalEntry[], windowMs: number): number {
  const starts = entries.filter((entry) => entry.what === 'start').map((entry) => entry.at);
  let peak = 0;
  let from = 0;
  for (let to = 0; to < starts.length; to++) {
    while (starts[to] - starts[from] >= windowMs) from++;
    peak = Math.max(peak, to - from + 1);
  }
  return peak;
}
