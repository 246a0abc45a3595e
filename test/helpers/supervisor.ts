import type { ChildProcess } from 'node:child_process';
import { spawnCli } from './cli.js';

type CliChild = ChildProcess & { out: string; err: string };

/** One end of a supervised process's run. */
export interface ProcessExit {
  name: string;
  /** Which run of the process this was (0 = the first). */
  run: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Killed on purpose through `kill()`. */
  killed: boolean;
  at: number;
}

interface Supervised {
  name: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  child: CliChild;
  run: number;
  /** stderr of the runs before the current one. */
  earlier: string[];
  killing: boolean;
}

/**
 * Runs `stagecoach` processes and restarts any that exits, as a container runtime or systemd
 * would (after `restartDelayMs`), until `stopAll()`. Counts the restarts and records every exit,
 * so a test can tell the kills it caused from exits of the processes' own.
 */
export class Supervisor {
  readonly exits: ProcessExit[] = [];
  private readonly processes = new Map<string, Supervised>();
  private stopping = false;

  constructor(private readonly restartDelayMs = 250) {}

  /** Starts `stagecoach ...args` under the name `name`. */
  add(name: string, args: string[], env: NodeJS.ProcessEnv = {}): void {
    if (this.processes.has(name)) throw new Error(`a process named ${name} is supervised already`);
    const entry: Supervised = { name, args, env, child: spawnCli(args, env), run: 0, earlier: [], killing: false };
    this.processes.set(name, entry);
    this.watch(entry);
  }

  get names(): string[] {
    return [...this.processes.keys()];
  }

  /** Restarts so far, of all processes. */
  get restarts(): number {
    return [...this.processes.values()].reduce((sum, p) => sum + p.run, 0);
  }

  /** Exits the test did not cause. */
  get ownExits(): ProcessExit[] {
    return this.exits.filter((exit) => !exit.killed);
  }

  /** The stderr of the process's current run. */
  stderr(name: string): string {
    return this.entry(name).child.err;
  }

  /** stderr of every run of the process, oldest first. */
  allStderr(name: string): string {
    const entry = this.entry(name);
    return [...entry.earlier, entry.child.err].join('');
  }

  /** Which run of the process is the current one (0 = the first; +1 per restart). */
  run(name: string): number {
    return this.entry(name).run;
  }

  /** The process's current run is alive. */
  alive(name: string): boolean {
    const { child } = this.entry(name);
    return child.exitCode === null && child.signalCode === null;
  }

  /** Sends `signal` to the current run; the supervisor restarts it when it exits. */
  kill(name: string, signal: NodeJS.Signals = 'SIGKILL'): void {
    const entry = this.entry(name);
    entry.killing = true;
    entry.child.kill(signal);
  }

  /**
   * Freezes the current run (SIGSTOP): it holds what it has in hand and takes nothing more, so a
   * test can act at a point it chose instead of racing the process. Short stops only: the
   * process answers no AMQP heartbeat while frozen.
   */
  freeze(name: string): void {
    this.entry(name).child.kill('SIGSTOP');
  }

  /** Lets a frozen run go on (SIGCONT); harmless on a running one. */
  thaw(name: string): void {
    this.entry(name).child.kill('SIGCONT');
  }

  /**
   * Stops restarting, sends SIGTERM to every process and waits up to `graceMs` for each to
   * exit; SIGKILLs what is left.
   */
  async stopAll(graceMs = 15_000): Promise<void> {
    this.stopping = true;
    await Promise.all(
      [...this.processes.values()].map(async ({ child }) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        child.kill('SIGCONT'); // a frozen run would otherwise sit on its SIGTERM until the SIGKILL
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  private entry(name: string): Supervised {
    const entry = this.processes.get(name);
    if (!entry) throw new Error(`no supervised process named ${name}`);
    return entry;
  }

  private watch(entry: Supervised): void {
    const child = entry.child;
    child.once('exit', (code, signal) => {
      if (this.stopping) return;
      this.exits.push({ name: entry.name, run: entry.run, code, signal, killed: entry.killing, at: Date.now() });
      entry.killing = false;
      setTimeout(() => {
        if (this.stopping) return;
        entry.earlier.push(child.err);
        entry.run++;
        entry.child = spawnCli(entry.args, entry.env);
        this.watch(entry);
      }, this.restartDelayMs);
    });
  }
}
