import { randomBytes } from 'node:crypto';
import { open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { compileConfig } from '../config/compile-config.js';
import type { CompiledConfig, RawConfig } from '../config/config.types.js';
import { applyEnvironment } from '../config/load-config.js';
import { ConfigError } from '../errors/errors.js';

/**
 * The configuration file as the admin API changes it: the file is the source of truth, so a
 * change made through the API survives a restart and `stagecoach plan` agrees with it.
 *
 * Invariants:
 * - nothing is written that does not compile (`compileConfig`, the shipped JSON Schema and the
 *   rules it cannot express), with the environment overrides applied as `loadConfig` does;
 * - the overrides themselves are never written back (`AMQP_URL` stays in the environment);
 * - a write is atomic (a temporary file in the same directory, flushed, then renamed over the
 *   file), so a reader or a crash sees the old file or the new one, never half of one;
 * - changes are serialized by the caller ({@link Serializer}): read, change and write never
 *   interleave with another change of this process.
 * The file is written as formatted JSON (two spaces): comments cannot exist in it, but its own
 * key order and spacing are not kept.
 */
export class ConfigFile {
  /** The last compile and the file identity it came from (inode, size, change times in ns). */
  private last?: { identity: string; config: CompiledConfig };
  private looking?: Promise<string | undefined>;

  constructor(
    readonly file: string,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  /** The file as written (no overrides applied). */
  async readRaw(): Promise<RawConfig> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      throw new ConfigError(this.file, '', `a readable file (${(err as Error).message})`);
    }
    try {
      return JSON.parse(text) as RawConfig;
    } catch (err) {
      throw new ConfigError(this.file, '', `valid JSON (${(err as Error).message})`);
    }
  }

  /** `raw` compiled as `loadConfig` would compile the file holding it. @throws ConfigError */
  compile(raw: RawConfig): CompiledConfig {
    return compileConfig(applyEnvironment(raw, this.env), this.file);
  }

  /**
   * The file as it is now, compiled. Every request of the HTTP binding asks, so the compile is
   * kept while the file's identity holds: an edit (in place, or a rename over it as {@link write}
   * does) changes its size, inode or change time and is compiled anew on the next call. The
   * object returned is shared between calls: callers read it, never change it.
   */
  async load(): Promise<CompiledConfig> {
    // Calls at once share one stat: an edit racing a request may be seen by the next one.
    this.looking ??= identityOf(this.file).finally(() => (this.looking = undefined));
    const before = await this.looking;
    if (before !== undefined && this.last?.identity === before) return this.last.config;
    const config = this.compile(await this.readRaw());
    // A change between the stat and the read leaves a newer compile under the older identity:
    // the next call sees another identity and compiles again.
    this.last = before === undefined ? undefined : { identity: before, config };
    return config;
  }

  /** Compiles `raw` (throws ConfigError, and writes nothing, when it does not), then replaces the file with it. */
  async write(raw: RawConfig): Promise<CompiledConfig> {
    const compiled = this.compile(raw);
    const mode = (await stat(this.file).catch(() => undefined))?.mode ?? 0o644;
    const temporary = path.join(path.dirname(this.file), `.${path.basename(this.file)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      const handle = await open(temporary, 'wx', mode & 0o777);
      try {
        await handle.writeFile(`${JSON.stringify(raw, null, 2)}\n`, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, this.file);
    } catch (err) {
      await rm(temporary, { force: true });
      throw err;
    }
    return compiled;
  }
}

/** What tells one version of the file from another, or undefined when it cannot be read. */
async function identityOf(file: string): Promise<string | undefined> {
  const info = await stat(file, { bigint: true }).catch(() => undefined);
  return info === undefined ? undefined : `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`;
}

/** Runs tasks one after another: the admin API's changes never interleave. */
export class Serializer {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Resolves once every task queued so far has settled (graceful shutdown). */
  idle(): Promise<void> {
    return this.tail.then(() => undefined);
  }
}
