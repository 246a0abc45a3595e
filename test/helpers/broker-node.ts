import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, readFileSync, rmSync, statSync } from 'node:fs';
import { chown, mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import amqplib from 'amqplib';
import type { CompiledConfig } from '../../src/config/config.types.js';
import type { RawConfig } from '../../src/config/raw-config.types.js';
import { withTestConfig } from '../../src/testing/test-config.js';

const run = promisify(execFile);

const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Where the Debian/Ubuntu `rabbitmq-server` package puts its commands. */
const SEARCH_PATH = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/usr/lib/rabbitmq/bin'];

function executable(name: string): string | undefined {
  for (const dir of SEARCH_PATH) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Why a private node cannot be started here, or undefined when it can: `rabbitmq-server` must be
 * installed and the tests must run as root (or as the `rabbitmq` user). The package's wrappers
 * drop to the `rabbitmq` user, so the node and `rabbitmqctl` share that user's Erlang cookie
 * (`/var/lib/rabbitmq/.erlang.cookie`): nothing to copy.
 */
export function brokerNodeUnsupported(): string | undefined {
  if (!executable('rabbitmq-server') || !executable('rabbitmqctl')) return 'rabbitmq-server is not installed';
  if (process.getuid?.() !== 0 && os.userInfo().username !== 'rabbitmq') return 'a private RabbitMQ node needs root or the rabbitmq user';
  return undefined;
}

export interface BrokerNodeOptions {
  /** Node name before `@localhost`; default `stagecoach-<random>`. */
  name?: string;
  /** AMQP listener port on 127.0.0.1; default a free port. */
  amqpPort?: number;
  /** Erlang distribution port (clustering, CLI tools), on 127.0.0.1; default a free port. */
  distPort?: number;
  /** Directory for the node's data, logs and configuration; default a fresh one in the temp dir. Removed by `remove()`. */
  dir?: string;
  /**
   * Plugins to enable (default none: no management or Prometheus listener to clash with the
   * main node's). `rabbitmq_management` and `rabbitmq_prometheus` get free ports.
   */
  plugins?: string[];
  /** Extra `rabbitmq.conf` lines, key = value. */
  config?: Record<string, string | number | boolean>;
  /**
   * `advanced.config` (Erlang terms), for settings `rabbitmq.conf` has no key for, e.g.
   * `[{rabbit, [{channel_tick_interval, 500}]}].` (how often a channel checks its consumer_timeout).
   */
  advancedConfig?: string;
  /** Bound on boot until an AMQP connection succeeds. @defaultValue 60 s */
  startTimeoutMs?: number;
  /**
   * The node outlives this process (scripts/cluster.sh `up`): not killed on exit, and the process
   * does not wait for it. Its directory says how to stop it (`rabbitmq.pid`). @defaultValue false
   */
  keep?: boolean;
}

/**
 * A private RabbitMQ node for tests that must stop, restart or break a broker without touching
 * the shared one: its own node name, AMQP and distribution ports, data, log and configuration
 * directory (owned by `rabbitmq`, which the package's `rabbitmq-server` drops to), and no plugins
 * unless asked. Several can run side by side (a later cluster helper joins them with `ctl()`).
 *
 * ```ts
 * const node = await BrokerNode.start();   // resolves once an AMQP connection succeeds
 * await node.stopApp(); await node.startApp();
 * await node.remove();                      // halts the node and deletes its directory
 * ```
 *
 * The node is also killed and its directory deleted when the test process exits without
 * `remove()` (a failing run): nothing is left behind.
 */
export class BrokerNode {
  /** How long `start()` took until the first AMQP connection, in ms. */
  startMs = 0;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private removed = false;
  private readonly onExit = (): void => this.killNow();
  /** On a signal that would end the test process without an 'exit' event: the node goes first. */
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    this.killNow();
    this.unwatch();
    // Nobody else handles it: the default action (termination), as if we had not listened.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };

  private constructor(
    /** Erlang node name, `<name>@localhost`: pass it to `rabbitmqctl -n`. */
    readonly nodename: string,
    readonly amqpPort: number,
    readonly distPort: number,
    readonly dir: string,
    readonly managementPort: number | undefined,
    readonly prometheusPort: number | undefined,
    private readonly startTimeoutMs: number,
    private readonly keep = false,
  ) {}

  /** `amqp://guest:guest@127.0.0.1:<port>/` (guest may log in from loopback). */
  get url(): string {
    return `amqp://guest:guest@127.0.0.1:${this.amqpPort}/`;
  }

  get pidFile(): string {
    return path.join(this.dir, 'rabbitmq.pid');
  }

  /** The node's main log file. */
  get logFile(): string {
    return path.join(this.dir, 'log', `${this.nodename}.log`);
  }

  /** Prepares the node's directory and boots it; resolves once it accepts AMQP connections. */
  static async start(options: BrokerNodeOptions = {}): Promise<BrokerNode> {
    const unsupported = brokerNodeUnsupported();
    if (unsupported) throw new Error(`cannot start a private RabbitMQ node: ${unsupported}`);
    const plugins = options.plugins ?? [];
    const ports = await freePorts(4);
    const amqpPort = options.amqpPort ?? ports[0];
    const distPort = options.distPort ?? ports[1];
    const managementPort = plugins.includes('rabbitmq_management') ? ports[2] : undefined;
    const prometheusPort = plugins.includes('rabbitmq_prometheus') ? ports[3] : undefined;
    const name = options.name ?? `stagecoach-${randomBytes(4).toString('hex')}`;
    const dir = options.dir ?? (await mkdtemp(path.join(tempBase(), `stagecoach-node-${name}-`)));
    const node = new BrokerNode(
      `${name}@localhost`,
      amqpPort,
      distPort,
      dir,
      managementPort,
      prometheusPort,
      options.startTimeoutMs ?? 60_000,
      options.keep ?? false,
    );
    if (!node.keep) node.watch();
    try {
      await node.prepare(plugins, options.config ?? {}, options.advancedConfig);
      await node.boot();
    } catch (err) {
      await node.remove().catch(() => undefined);
      throw err;
    }
    return node;
  }

  /**
   * Boots the node's Erlang VM on its directory (again, after `halt()`: data kept) and waits,
   * within the start timeout, until an AMQP connection succeeds.
   */
  async boot(): Promise<void> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) throw new Error(`${this.nodename} is running`);
    const began = Date.now();
    const out = await open(path.join(this.dir, 'server.out'), 'a');
    try {
      // The package's wrapper runs the server as the rabbitmq user (su keeps this environment).
      const child = spawn(executable('rabbitmq-server') as string, [], {
        env: { ...process.env, ...this.environment() },
        stdio: ['ignore', out.fd, out.fd],
        detached: true,
      });
      this.child = child;
      if (this.keep) child.unref();
      this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    } finally {
      await out.close();
    }
    await this.waitForAmqp(this.startTimeoutMs);
    this.startMs = Date.now() - began;
  }

  /** Runs `rabbitmqctl -n <node> ...args` (as the rabbitmq user, through the package wrapper); returns stdout. */
  async ctl(args: string[], timeoutMs = 60_000): Promise<string> {
    try {
      const { stdout } = await run(executable('rabbitmqctl') as string, ['-n', this.nodename, ...args], { timeout: timeoutMs });
      return stdout;
    } catch (err) {
      const { stderr, stdout } = err as { stderr?: string; stdout?: string };
      throw new Error(
        `rabbitmqctl ${args.join(' ')} on ${this.nodename} failed: ${(err as Error).message} ${stdout ?? ''} ${stderr ?? ''}`,
        {
          cause: err,
        },
      );
    }
  }

  /** `rabbitmqctl stop_app`: the broker application stops (every connection is closed), the Erlang node stays. */
  async stopApp(): Promise<void> {
    await this.ctl(['stop_app']);
  }

  /** `rabbitmqctl start_app`, then waits until an AMQP connection succeeds. */
  async startApp(timeoutMs = this.startTimeoutMs): Promise<void> {
    await this.ctl(['start_app'], timeoutMs);
    await this.waitForAmqp(timeoutMs);
  }

  /** Polls until an AMQP connection and a channel open; fails early when the node's process exits. */
  async waitForAmqp(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      if (this.child && (this.child.exitCode !== null || this.child.signalCode !== null)) {
        throw new Error(`${this.nodename} exited during start-up:\n${await this.diagnostics()}`);
      }
      try {
        const connection = await amqplib.connect(this.url);
        connection.on('error', () => undefined);
        await (await connection.createChannel()).close();
        await connection.close();
        return;
      } catch (err) {
        last = err;
      }
      if (Date.now() > deadline) {
        throw new Error(
          `${this.nodename} accepted no AMQP connection within ${timeoutMs} ms (${(last as Error).message}):\n${await this.diagnostics()}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /**
   * Halts the Erlang VM (`rabbitmqctl stop`, which waits for the process to end); the data stay,
   * `boot()` starts it again. Kills it when that fails.
   */
  async halt(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    try {
      await this.ctl(['stop', this.pidFile], 60_000);
    } catch {
      this.killNow(false);
    }
    if (!(await within(this.exited, 15_000))) {
      this.killNow(false);
      await within(this.exited, 5_000);
    }
    // A pid file left behind must not make a later kill hit a process that reused the pid.
    await rm(this.pidFile, { force: true });
  }

  /** Halts the node and deletes its directory. Idempotent; safe after a failed start. */
  async remove(): Promise<void> {
    if (this.removed) return;
    this.removed = true;
    try {
      await this.halt();
    } finally {
      this.unwatch();
      await rm(this.dir, { recursive: true, force: true });
    }
  }

  /** The last lines of the server's output and log, for failure messages. */
  async diagnostics(lines = 30): Promise<string> {
    const tail = async (file: string): Promise<string> =>
      (await readFile(file, 'utf8').catch(() => '')).split('\n').slice(-lines).join('\n');
    return `--- ${path.join(this.dir, 'server.out')}\n${await tail(path.join(this.dir, 'server.out'))}\n--- ${this.logFile}\n${await tail(this.logFile)}`;
  }

  private environment(): Record<string, string> {
    return {
      RABBITMQ_NODENAME: this.nodename,
      RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
      RABBITMQ_NODE_PORT: String(this.amqpPort),
      RABBITMQ_DIST_PORT: String(this.distPort),
      // Not the system's files: /etc/rabbitmq/rabbitmq-env.conf names the main node.
      RABBITMQ_CONF_ENV_FILE: path.join(this.dir, 'rabbitmq-env.conf'),
      RABBITMQ_CONFIG_FILE: path.join(this.dir, 'rabbitmq.conf'),
      RABBITMQ_ADVANCED_CONFIG_FILE: path.join(this.dir, 'advanced.config'),
      RABBITMQ_ENABLED_PLUGINS_FILE: path.join(this.dir, 'enabled_plugins'),
      RABBITMQ_MNESIA_BASE: path.join(this.dir, 'mnesia'),
      RABBITMQ_LOG_BASE: path.join(this.dir, 'log'),
      RABBITMQ_PID_FILE: this.pidFile,
      // Not in the rabbitmq user's home, where the package's wrapper starts the server.
      ERL_CRASH_DUMP: path.join(this.dir, 'erl_crash.dump'),
      // Distribution (clustering, CLI tools) on loopback only.
      ERL_FLAGS: '-kernel inet_dist_use_interface {127,0,0,1}',
    };
  }

  private async prepare(plugins: string[], extra: Record<string, string | number | boolean>, advanced?: string): Promise<void> {
    await mkdir(path.join(this.dir, 'mnesia'), { recursive: true });
    await mkdir(path.join(this.dir, 'log'), { recursive: true });
    const conf: Record<string, string | number | boolean> = {
      'listeners.tcp.default': `127.0.0.1:${this.amqpPort}`,
      'log.console': false,
      'log.file.level': 'info',
      ...(this.managementPort === undefined ? {} : { 'management.tcp.ip': '127.0.0.1', 'management.tcp.port': this.managementPort }),
      ...(this.prometheusPort === undefined ? {} : { 'prometheus.tcp.ip': '127.0.0.1', 'prometheus.tcp.port': this.prometheusPort }),
      ...extra,
    };
    await writeFile(
      path.join(this.dir, 'rabbitmq.conf'),
      Object.entries(conf)
        .map(([key, value]) => `${key} = ${String(value)}\n`)
        .join(''),
    );
    await writeFile(path.join(this.dir, 'enabled_plugins'), `[${plugins.join(',')}].\n`);
    await writeFile(path.join(this.dir, 'advanced.config'), advanced ?? '[].\n');
    // Read by the server scripts too: the same settings, so that the directory says how the node runs.
    await writeFile(
      path.join(this.dir, 'rabbitmq-env.conf'),
      Object.entries(this.environment())
        .filter(([key]) => key.startsWith('RABBITMQ_') && key !== 'RABBITMQ_CONF_ENV_FILE')
        .map(([key, value]) => `${key}=${value}\n`)
        .join(''),
    );
    if (process.getuid?.() === 0) {
      const uid = Number((await run('id', ['-u', 'rabbitmq'])).stdout.trim());
      const gid = Number((await run('id', ['-g', 'rabbitmq'])).stdout.trim());
      for (const entry of ['', 'mnesia', 'log', 'rabbitmq.conf', 'advanced.config', 'enabled_plugins', 'rabbitmq-env.conf']) {
        await chown(path.join(this.dir, entry), uid, gid);
      }
    }
  }

  /**
   * Kills the node and deletes its directory if the test process ends without `remove()`: on
   * exit, and on SIGINT/SIGTERM/SIGHUP (which end a process without an 'exit' event).
   */
  private watch(): void {
    process.once('exit', this.onExit);
    for (const signal of SIGNALS) process.once(signal, this.onSignal);
  }

  private unwatch(): void {
    process.removeListener('exit', this.onExit);
    for (const signal of SIGNALS) process.removeListener(signal, this.onSignal);
  }

  /** Kills the node's VM (its pid file) and the wrapper at once; on process exit also deletes the directory. */
  private killNow(andDelete = true): void {
    let pid: number | undefined;
    try {
      pid = Number(readFileSync(this.pidFile, 'utf8').trim());
    } catch {
      // not booted far enough to write it
    }
    for (const target of [pid, this.child?.pid === undefined ? undefined : -this.child.pid]) {
      if (!target) continue;
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (andDelete) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The temp directory, if the rabbitmq user can reach into it (a root-only TMPDIR would not do), else /tmp. */
function tempBase(): string {
  const dir = os.tmpdir();
  try {
    return (statSync(dir).mode & 0o001) !== 0 ? dir : '/tmp';
  } catch {
    return '/tmp';
  }
}

/** `count` distinct free TCP ports on 127.0.0.1 (held together while picked, so they differ). */
export async function freePorts(count: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve());
      });
    }
    return servers.map((server) => (server.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The test preset's configuration on a private node, whatever AMQP_URL says (withTestConfig
 * reads the environment first): the variable is swapped for the call and put back.
 */
export function configOnNode(node: BrokerNode, raw: RawConfig, source?: string): CompiledConfig {
  const saved = process.env.AMQP_URL;
  process.env.AMQP_URL = node.url;
  try {
    return withTestConfig(raw, source);
  } finally {
    if (saved === undefined) delete process.env.AMQP_URL;
    else process.env.AMQP_URL = saved;
  }
}
