/**
 * What the benchmark's child processes share (bench/memory-child.ts, bench/pooled-child.ts):
 * each runs one stage group in a process of its own, so that its memory is measured alone, and
 * talks to the parent over IPC. The harness reads the input from the environment, compiles the
 * configuration, reports a failed group, stops the group on the parent's 'stop', exits when the
 * parent is gone, and reports process.memoryUsage() every 250 ms once the child is ready.
 */
import { compileConfig, createLogger, type CompiledConfig, type Logger, type RawConfig, type StageGroup } from '../src/index.js';

/** What every child is given: the configuration to compile, and where it came from. */
export interface ChildInputBase {
  raw: RawConfig;
  source: string;
}

export interface Child<I extends ChildInputBase> {
  input: I;
  config: CompiledConfig;
  log: Logger;
  /** Sends to the parent while it is connected. */
  send(message: Record<string, unknown>): void;
}

/**
 * Reads the input from env `envVar` (JSON), or exits 2 when the child was not started by the
 * benchmark; exits 1 when the parent disconnects (killed, crashed), so that no child lingers.
 */
export function startChild<I extends ChildInputBase>(name: string, envVar: string): Child<I> {
  const input = JSON.parse(process.env[envVar] ?? 'null') as I | null;
  if (!input || typeof process.send !== 'function') {
    process.stderr.write(`${name}: run by the benchmark only (needs ${envVar} and an IPC channel)\n`);
    process.exit(2);
  }
  const send = (message: Record<string, unknown>): void => {
    if (process.connected) process.send?.(message);
  };
  // The parent gone (killed, crashed): do not linger.
  process.on('disconnect', () => process.exit(1));
  const config = compileConfig(input.raw, input.source);
  const log = createLogger({ component: `bench-${name}` }, process.env.LOG_LEVEL ?? 'warn');
  return { input, config, log, send };
}

/**
 * Reports the group's failure and exits 1; on the parent's 'stop' (once), runs `stop` (by default
 * `group.stop()`), answers 'stopped' and exits 0.
 */
export function superviseGroup(child: Child<ChildInputBase>, group: StageGroup, stop: () => Promise<unknown> = () => group.stop()): void {
  void group.failed.then((err) => {
    child.send({ kind: 'error', message: err.message });
    process.exit(1);
  });
  let stopping = false;
  process.on('message', (message) => {
    if (message !== 'stop' || stopping) return;
    stopping = true;
    void (async () => {
      await stop();
      child.send({ kind: 'stopped' });
      process.exit(0);
    })();
  });
}

/** Polls `done` every `pollMs` until it holds; after `timeoutMs`, reports `failure()` as an error and exits 1. */
export async function waitFor(
  child: Child<ChildInputBase>,
  done: () => boolean,
  timeoutMs: number,
  pollMs: number,
  failure: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) {
      child.send({ kind: 'error', message: failure() });
      process.exit(1);
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/** Sends 'ready' with `ready` and the memory usage, then a 'sample' with `sample()` and the memory usage every 250 ms. */
export function reportMemory(
  child: Child<ChildInputBase>,
  ready: Record<string, unknown>,
  sample: () => Record<string, unknown> = () => ({}),
): void {
  child.send({ kind: 'ready', ...ready, ...process.memoryUsage() });
  setInterval(() => child.send({ kind: 'sample', ...sample(), ...process.memoryUsage() }), 250);
}
