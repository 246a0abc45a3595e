import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time of the broker when it runs on this machine: the user + system time of every
 * `beam.smp` process (Linux `/proc`), µs; undefined elsewhere. Every node of a local cluster is
 * counted, and so is the work the broker does for other clients at the same time: compare the
 * two sides of one run, not runs.
 */
export function brokerCpuNow(): number | undefined {
  const pids = (beamPids ??= findBeams());
  if (pids.length === 0) return undefined;
  const cpu = processCpuNow(pids);
  if (cpu === undefined) beamPids = undefined;
  return cpu;
}

/** CPU time (user + system, µs) of the given processes (Linux `/proc`); undefined once one is gone. */
export function processCpuNow(pids: readonly (string | number)[]): number | undefined {
  let ticks = 0;
  try {
    for (const pid of pids) {
      // Fields after the command (which may hold spaces) start after its ')': utime and stime are the 12th and 13th.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    }
  } catch {
    return undefined;
  }
  return (ticks * 1e6) / CLOCK_TICKS;
}

/** USER_HZ: 100 on every Linux this runs on (`getconf CLK_TCK`). */
const CLOCK_TICKS = 100;
let beamPids: string[] | undefined;

function findBeams(): string[] {
  return pidsNamed('beam.smp');
}

/** The processes whose command (`/proc/<pid>/comm`) is `command`: `postgres` for the server and its backends. */
export function pidsNamed(command: string): string[] {
  try {
    return readdirSync('/proc').filter((entry) => {
      if (!/^\d+$/.test(entry)) return false;
      try {
        return readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === command;
      } catch {
        return false;
      }
    });
  } catch {
    return [];
  }
}
