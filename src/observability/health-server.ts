import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../logging/logger.js';

/** What `/metrics` serves: {@link StageMetrics} fits. */
export interface MetricsText {
  text(): Promise<string>;
  readonly contentType: string;
}

/** The answer of a readiness check: `reason` says what is missing when not ready. */
export interface Readiness {
  ready: boolean;
  reason?: string;
  /** The broker node (`host:port`) the process is connected to, shown when known. */
  node?: string;
  /** Set while the broker blocks the connection (a resource alarm): shown as is. */
  blocked?: { reason: string; since: string };
}

export interface HealthServerOptions {
  /** The TCP port; 0 picks a free one (see {@link HealthServer.port}). */
  port: number;
  /** The address to listen on (default `0.0.0.0`: every IPv4 interface, as a container needs). */
  host?: string;
  metrics: MetricsText;
  /** Called on every `GET /readyz`; keep it cheap and synchronous. */
  readiness: () => Readiness;
  log: Logger;
}

export interface HealthServer {
  /** The port actually listened on (the one picked when 0 was asked for). */
  readonly port: number;
  readonly host: string;
  /** Stops listening and closes every open connection. Safe to call more than once. */
  close(): Promise<void>;
}

/** The server could not listen: the port is in use, not allowed, or the host is not local. */
export class HealthServerError extends Error {
  constructor(
    message: string,
    readonly host: string,
    readonly port: number,
    /** The system error code (`EADDRINUSE`, `EACCES`, `EADDRNOTAVAIL`...). */
    readonly code: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'HealthServerError';
  }
}

const TEXT = 'text/plain; charset=utf-8';
const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The HTTP endpoints of a stage process, on plain `node:http`:
 *
 * | route | answer |
 * | --- | --- |
 * | `GET /healthz` | 200 `ok` whenever the process answers at all (liveness: a blocked event loop answers nothing) |
 * | `GET /readyz` | 200 `{"ready":true}`, or 503 `{"ready":false,"reason":"..."}`, from `readiness()` |
 * | `GET /metrics` | 200, the Prometheus text of `metrics`, with its content type |
 * | anything else | 404 (405 for another method than GET or HEAD on the routes above) |
 *
 * A handler that throws (a readiness check, a metrics collector) answers 500 and is logged; it
 * never takes the process down. Resolves once listening; rejects with a
 * {@link HealthServerError} naming the port when it cannot listen (port already in use).
 */
export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const { port, host = '0.0.0.0', metrics, readiness, log } = options;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new HealthServerError(`health server: port must be an integer from 0 to 65535, not ${String(port)}`, host, port, undefined);
  }

  const routes: Record<string, (res: http.ServerResponse, head: boolean) => Promise<void> | void> = {
    '/healthz': (res, head) => send(res, head, 200, TEXT, 'ok\n'),
    '/readyz': (res, head) => {
      const state = readiness();
      const body = {
        ...(state.ready === true ? { ready: true } : { ready: false, reason: state.reason ?? 'not ready' }),
        ...(state.node === undefined ? {} : { node: state.node }),
        ...(state.blocked === undefined ? {} : { blocked: state.blocked }),
      };
      send(res, head, state.ready === true ? 200 : 503, JSON_TYPE, `${JSON.stringify(body)}\n`);
    },
    '/metrics': async (res, head) => {
      const text = await metrics.text();
      send(res, head, 200, metrics.contentType, text);
    },
  };

  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
    const head = req.method === 'HEAD';
    if (route === undefined) {
      send(res, head, 404, TEXT, 'not found\n');
      return;
    }
    if (req.method !== 'GET' && !head) {
      res.setHeader('Allow', 'GET, HEAD');
      send(res, false, 405, TEXT, 'method not allowed\n');
      return;
    }
    // A synchronous throw and a rejection end up here alike.
    Promise.resolve()
      .then(() => route(res, head))
      .catch((err: unknown) => {
        log.error('health server: request failed', {
          path,
          error: err instanceof Error ? err.message : String(err),
          stack: err instanceof Error ? err.stack : undefined,
        });
        if (res.headersSent) res.destroy();
        else send(res, head, 500, TEXT, 'internal error\n');
      });
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.off('listening', onListening);
      reject(listenError(err, host, port));
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
  // From now on a server error is logged, never an uncaught 'error' event.
  server.on('error', (err) => log.error('health server error', { error: err.message }));

  const actual = (server.address() as AddressInfo).port;
  log.info('health server listening', { host, port: actual });

  let closing: Promise<void> | undefined;
  return {
    port: actual,
    host,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive and in-flight scrapes would hold close() open; nothing here is worth waiting for.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function send(res: http.ServerResponse, head: boolean, status: number, contentType: string, body: string): void {
  res.writeHead(status, {
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
  });
  res.end(head ? undefined : body);
}

function listenError(err: NodeJS.ErrnoException, host: string, port: number): HealthServerError {
  const where = `${host}:${port}`;
  const why =
    err.code === 'EADDRINUSE'
      ? `port ${port} is already in use (on ${host})`
      : err.code === 'EACCES'
        ? `not allowed to listen on port ${port} (on ${host})`
        : err.code === 'EADDRNOTAVAIL'
          ? `address ${host} is not available on this machine (port ${port})`
          : `cannot listen on ${where}: ${err.message}`;
  return new HealthServerError(`health server: ${why}`, host, port, err.code, { cause: err });
}
