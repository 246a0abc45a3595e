import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (tests run from dist/test/...). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const CLI = path.join(REPO_ROOT, 'bin/stagecoach.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `stagecoach ...args` to completion (bounded by `timeoutMs`, then killed and failed). */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 20000): Promise<CliResult> {
  const child = spawnCli(args, env);
  return finished(child, timeoutMs, args.join(' '));
}

/** Starts `stagecoach ...args` in the background; stdout and stderr are collected on the object. */
export function spawnCli(args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess & { out: string; err: string } {
  const child = spawn(process.execPath, [CLI, ...args], {
    // No health port unless a test asks for one: the default 9400 may be taken on this machine.
    env: { ...process.env, LOG_LEVEL: 'info', STAGECOACH_HTTP_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as ChildProcess & { out: string; err: string };
  child.out = '';
  child.err = '';
  child.stdout?.on('data', (chunk: Buffer) => (child.out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (child.err += chunk.toString()));
  return child;
}

/** Resolves when the child exits; kills it and rejects when it does not within `timeoutMs`. */
export function finished(child: ChildProcess & { out?: string; err?: string }, timeoutMs: number, what: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`stagecoach ${what} did not exit within ${timeoutMs} ms; stderr: ${child.err ?? ''}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      // Let the pipes flush what the process wrote last.
      setImmediate(() => resolve({ code, stdout: (child as { out?: string }).out ?? '', stderr: (child as { err?: string }).err ?? '' }));
    });
  });
}
