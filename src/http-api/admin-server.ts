import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TrackingFollower } from '../tracker/tracking-follower.js';
import { createJobStore } from '../job-state/create-job-store.js';
import type { JobStore } from '../job-state/job-store.js';
import { MemoryJobStore } from '../job-state/memory-job-store.js';
import { uniqueGateFor } from '../job-state/unique/unique-gate.js';
import { loadDashboard } from '../dashboard/dashboard.js';
import type { Logger } from '../logging/logger.js';
import { createPayloadStore } from '../payload/create-payload-store.js';
import { payloadOffloaderFor } from '../payload/payload-offloader.js';
import { WorkflowAdvancer } from '../workflow/workflow-advancer.js';
import { PayloadSweeper } from '../payload/payload-sweeper.js';
import { loadAllStages } from '../stage/stage-loader.js';
import type { StageEndpoints } from '../topology/topology.types.js';
import type { AdminContext } from './admin-context.js';
import { managementClientOf } from '../broker-management/management-client.js';
import { hostAllowed, LOOPBACK_HOSTS } from './host-check.js';
import { StagecoachError } from '../errors/errors.js';
import { toOjsError } from './api-error.js';
import { callerOf } from './bearer-auth.js';
import { ConfigFile, Serializer } from './config-file.js';
import { adminRoutes } from './routes.js';
import { Router } from './router.js';
import { createBindingContext } from './http-binding/binding-context.js';
import { webhookDeliverer } from './http-binding/webhook-deliverer.js';
import { toBindingError } from './http-binding/binding-error.js';
import { bindingRoutes } from './http-binding/binding-routes.js';
import { checkTenantHeader } from './http-binding/request-tenant.js';
import { isBindingRequest, OJS_MEDIA_TYPE, OJS_VERSION } from './http-binding/ojs-media.js';
import { unsupportedEndpoint } from './http-binding/unsupported-endpoints.js';
import { requestIdOf } from './request-id.js';
import { ApiError } from './api-error.js';
import { ScheduleFollower } from '../schedule/schedule-follower.js';
import { Scheduler } from '../schedule/scheduler.js';
import type { WebhookDeliveryOptions } from '../webhooks/webhook-queue.js';

/** Where the admin API listens unless told otherwise: this machine only. */
export const DEFAULT_ADMIN_HOST = '127.0.0.1';
export const DEFAULT_ADMIN_PORT = 9500;

export interface AdminServerOptions {
  /** The configuration file: read for every request, written by PUT, POST and DELETE. */
  configFile: string;
  /** @defaultValue 9500; 0 picks a free port (see {@link AdminServer.port}). */
  port?: number;
  /** @defaultValue 127.0.0.1 */
  host?: string;
  /** The bearer token changes need; undefined refuses every change (see bearer-auth.ts). */
  token: string | undefined;
  log: Logger;
  /** The configured stages' endpoints; by default loaded from the configuration's stage modules. */
  stages?: readonly StageEndpoints[];
  /** Environment overrides applied to the file as `loadConfig` applies them. @defaultValue process.env */
  env?: NodeJS.ProcessEnv;
  /**
   * Sweep the payload store periodically (orphans after `payloads.orphan_after`, everything after
   * `payloads.retention`; docs/payloads.md). Off where something else sweeps (a CronJob running
   * `stagecoach payloads sweep`). @defaultValue true
   */
  payloadSweep?: boolean;
  /**
   * Serve `POST /ojs/v1/admin/reset`, which deletes every job of the prefix (conformance runs,
   * local development; never production). @defaultValue false
   */
  testReset?: boolean;
  /**
   * A request without an `Authorization` header acts as the admin (the conformance runner sends
   * none). Refused unless `host` is a loopback address. @defaultValue false
   */
  noAuth?: boolean;
  /**
   * Run a scheduler in the server (docs/schedules.md): it fires the schedules while this process
   * is the leader. Off where `stagecoach scheduler` processes do it alone. @defaultValue true
   */
  scheduler?: boolean;
  /** What one caller can make the server hold, and how long a request may take to arrive. */
  limits?: AdminServerLimits;
  /** How webhook deliveries are tried (docs/webhooks.md); the spec's retry schedule by default. */
  webhooks?: WebhookDeliveryOptions;
}

/** The admin port's bounds (docs/security.md, "The admin port"). */
export interface AdminServerLimits {
  /**
   * Queues that no configuration names which one tenant's token may have this server create
   * (OJS implicit creation, by pushing to them) and serve to its workers; past it a push to yet
   * another is 429 `tenant_limit_exceeded`. The admin token is not bounded. @defaultValue 64
   */
  queuesPerTenant?: number;
  /** Milliseconds a client has to send a whole request, headers and body: a slow client cannot stretch it. @defaultValue 30000 */
  requestTimeoutMs?: number;
  /** Milliseconds a client has to send a request's headers. @defaultValue 10000 */
  headersTimeoutMs?: number;
}

export const DEFAULT_QUEUES_PER_TENANT = 64;
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;

export interface AdminServer {
  readonly port: number;
  readonly host: string;
  /**
   * Stops taking requests, lets those under way finish (changes included: a configuration write
   * or a removal is never cut in half), then closes idle connections. Safe to call twice.
   */
  close(): Promise<void>;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The OJS queue admin HTTP API (docs/admin-api.md) and the OJS HTTP binding on plain `node:http`.
 * Who may call what is decided once per request, before its body is read (bearer-auth.ts
 * callerOf; docs/security.md, "The admin port"). Answers are JSON; errors are OJS error objects.
 */
export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const { log } = options;
  const host = options.host ?? DEFAULT_ADMIN_HOST;
  if (options.noAuth === true && !LOOPBACK_HOSTS.has(host)) {
    throw new StagecoachError(
      'INVALID_REQUEST',
      `--no-auth is refused on host "${host}": it serves every change to anyone who can connect, so only on a loopback address (127.0.0.1, ::1, localhost)`,
    );
  }
  const configFile = new ConfigFile(options.configFile, options.env);
  const config = await configFile.load();
  // Like `plan` and `queue delete`, it must know which queues the stages use: a module that
  // cannot be loaded stops the start (StageNotFoundError) rather than let a used queue be deleted.
  const stages = options.stages ?? (await loadAllStages(config)).map((stage) => stage.metadata);
  const serializer = new Serializer();
  // One reader of the tracking stream for the server's life, not a replay per request. It reads
  // the prefix and broker of the file as it is now: a change to those needs a restart.
  // One payload store for the server's life, of the file as it is now (a change needs a restart):
  // the dashboard loads the arguments of jobs sent by reference from it, and the sweeper cleans it.
  const payloads = createPayloadStore(config);
  // The reader also advances workflows while it holds the workflow lock (docs/workflows.md).
  const advancer = WorkflowAdvancer.plugin({ config, log, payloads: payloadOffloaderFor(config, log, payloads) });
  const batches = new TrackingFollower(config, log, undefined, [advancer]);
  const workflows = async (): Promise<WorkflowAdvancer> => {
    const found = (await batches.tracker()).plugins.find((plugin) => plugin instanceof WorkflowAdvancer);
    if (found === undefined) throw new StagecoachError('CONNECTION_FAILED', 'the tracking reader keeps no workflows');
    return found as WorkflowAdvancer;
  };
  const sweeper = options.payloadSweep === false ? undefined : new PayloadSweeper({ store: payloads, payloads: config.payloads, log });
  // PostgreSQL: one pool for the server's life, read directly; memory: the follower's store.
  const store = config.tracking.store.kind === 'postgres' ? createJobStore(config) : undefined;
  const jobs = (): Promise<JobStore> => (store === undefined ? batches.jobs() : Promise.resolve(store));
  // With the memory store, the follower's store is where this server's pushes claim unique keys.
  const unfold = store === undefined ? uniqueGateFor(config).foldsHere(async () => memoryStoreOf(await batches.jobs())) : undefined;
  // One reader of the schedules stream for the server's life; its scheduler shares it, and reads overlap where the API reads jobs.
  const schedules = new ScheduleFollower(config, log);
  const scheduler =
    options.scheduler === false
      ? undefined
      : new Scheduler(config, {
          log,
          config: () => configFile.load(),
          follower: schedules,
          overlap: { jobs, batches: () => batches.fold() },
        });
  const ctx: AdminContext = {
    configFile,
    stages,
    log,
    serializer,
    api: (config) => managementClientOf(config),
    batches,
    workflows,
    jobs,
    payloads,
    schedules,
  };
  // The operators' web page at `/` and the API routes it adds (src/dashboard/).
  const dashboard = await loadDashboard(ctx);
  const binding = createBindingContext(ctx, {
    testReset: options.testReset === true,
    queuesPerTenant: options.limits?.queuesPerTenant ?? DEFAULT_QUEUES_PER_TENANT,
    ...(options.webhooks === undefined ? {} : { webhooks: options.webhooks }),
  });
  const deliverer = webhookDeliverer(config, log, binding.webhooks, options.webhooks?.delivererRetryMs);
  const router = new Router([...adminRoutes(ctx), ...bindingRoutes(binding), ...dashboard.routes]);
  /**
   * The route of a request. A path under `/ojs/` that no route serves is answered as the binding
   * answers (its media type, lowercase codes; `binding()` says so): 422 `unsupported` for an OJS
   * endpoint this server does not serve, else 404 `not_found`.
   */
  const matchRoute = (method: string, pathname: string, binding: () => void): ReturnType<Router['match']> => {
    try {
      return router.match(method, pathname);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404 || !pathname.startsWith('/ojs/')) throw err;
      binding();
      throw unsupportedEndpoint(method, pathname) ?? err;
    }
  };

  const requestTimeout = options.limits?.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const server = http.createServer(
    {
      requestTimeout,
      headersTimeout: Math.min(options.limits?.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS, requestTimeout),
      // Node checks the timeouts above this often (30 s by default, which would stretch them).
      connectionsCheckingInterval: Math.min(1000, Math.max(100, Math.floor(requestTimeout / 4))),
    },
    (req, res) => {
      void answer(req, res);
    },
  );
  const answer = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    // Every answer carries its request's id (binding 6.5, 19), the dashboard's pages included.
    const requestId = requestIdOf(req);
    res.setHeader('X-Request-Id', requestId);
    if (!hostAllowed(host, req.headers.host)) {
      const text = `${JSON.stringify(
        {
          error: {
            code: 'INVALID_REQUEST',
            message: `host "${req.headers.host ?? ''}" is not this server's`,
            retryable: false,
            request_id: requestId,
          },
        },
        null,
        2,
      )}\n`;
      res.writeHead(421, { 'Content-Type': JSON_TYPE, 'Content-Length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    if (dashboard.serve(req, res)) return;
    let path = req.url ?? '/';
    let status: number;
    let body: unknown;
    let headers: Readonly<Record<string, string>> | undefined;
    let ojs = false;
    try {
      // Inside the try: a request target URL cannot parse is answered, never an unhandled rejection.
      const url = new URL(req.url ?? '/', 'http://admin.invalid');
      path = url.pathname;
      ojs = isBindingRequest(path);
      const { route, params } = matchRoute(req.method ?? 'GET', url.pathname, () => (ojs = true));
      const caller = callerOf(
        req.headers.authorization,
        { token: options.token, prefix: config.prefix, noAuth: options.noAuth === true },
        route,
      );
      const request = { params, query: url.searchParams, req, caller };
      checkTenantHeader(request);
      ({ status, body, headers } = await route.handle(request));
    } catch (err) {
      ({ status, body, headers } = ojs ? toBindingError(err) : toOjsError(err));
      (body as { error: { request_id?: string } }).error.request_id = requestId;
      const fields = { method: req.method, path, status, error: (err as Error).message };
      if (status >= 500) log.error('admin API request failed', { ...fields, stack: (err as Error).stack });
      else log.info('admin API request refused', fields);
    }
    const text = `${JSON.stringify(body, null, 2)}\n`;
    res.writeHead(status, {
      'Content-Type': ojs ? OJS_MEDIA_TYPE : JSON_TYPE,
      'OJS-Version': OJS_VERSION,
      'Content-Length': Buffer.byteLength(text),
      'Cache-Control': 'no-store',
      ...(status === 401 ? { 'WWW-Authenticate': 'Bearer realm="stagecoach-admin"' } : {}),
      ...headers,
    });
    res.end(text);
  };

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? DEFAULT_ADMIN_PORT, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log.error('admin server error', { error: err.message }));
  // In the background: the queue endpoints answer without the broker's stream, and a long replay
  // (or a broker away) must not hold up the start; batch requests wait for it, within a bound.
  batches.start();
  sweeper?.start();
  schedules.start();
  scheduler?.start();
  deliverer.start();
  const port = (server.address() as AddressInfo).port;
  log.info('admin API listening', {
    host,
    port,
    ...(options.testReset === true ? { test_reset: 'POST /ojs/v1/admin/reset deletes every job' } : {}),
    changes:
      options.noAuth === true
        ? 'open to requests without a token (--no-auth)'
        : options.token === undefined || options.token === ''
          ? 'disabled (no token)'
          : 'with token',
  });

  let closing: Promise<void> | undefined;
  return {
    port,
    host,
    close(): Promise<void> {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await serializer.idle();
        // Kept-alive connections that served the last requests; any still busy gets a few seconds.
        server.closeIdleConnections();
        const timer = setTimeout(() => server.closeAllConnections(), 5000);
        timer.unref();
        await closed;
        clearTimeout(timer);
        await scheduler?.stop();
        await deliverer.stop();
        await binding.close();
        await schedules.close();
        unfold?.();
        await batches.close();
        await store?.close();
        await sweeper?.stop();
        await payloads.close();
      })();
      return closing;
    },
  };
}

function memoryStoreOf(store: JobStore): MemoryJobStore {
  if (!(store instanceof MemoryJobStore)) throw new StagecoachError('CONNECTION_FAILED', 'the tracking follower keeps no memory job store');
  return store;
}
