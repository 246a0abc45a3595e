import { loadConfig } from '../../config/load-config.js';
import { StagecoachError } from '../../errors/errors.js';
import { createLogger } from '../../logging/logger.js';
import { startHealthServer } from '../../observability/health-server.js';
import { Scheduler } from '../../schedule/scheduler.js';
import { EXIT_OK } from '../exit-codes.js';
import { untilSignal } from '../signals.js';

/**
 * `stagecoach scheduler [--config F] [--http-port P]`: asks for the schedulers' leadership and,
 * while it holds it, fires the schedules (docs/schedules.md), until SIGTERM/SIGINT. Run two or
 * more for failover: one leads, another takes over within 30 s. Serves `/healthz`, `/readyz` and
 * `/metrics` (`stagecoach_scheduler_leader`, 1 while this process leads) on `--http-port`.
 */
export async function scheduler(opts: { config?: string; httpPort?: string }): Promise<number> {
  const config = await loadConfig(opts.config);
  const log = createLogger({ service: 'stagecoach', command: 'scheduler' });
  const port = opts.httpPort === undefined ? config.httpPort : Number(opts.httpPort);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new StagecoachError('INVALID_REQUEST', `--http-port must be a port number (0 turns it off), got "${opts.httpPort}"`);
  }
  const signal = untilSignal();
  const running = new Scheduler(config, { log });
  const http =
    port === 0
      ? undefined
      : await startHealthServer({
          port,
          log,
          readiness: () => ({ ready: true }),
          metrics: {
            contentType: 'text/plain; version=0.0.4; charset=utf-8',
            text: () =>
              Promise.resolve(
                "# HELP stagecoach_scheduler_leader 1 while this process is the schedulers' leader.\n# TYPE stagecoach_scheduler_leader gauge\n" +
                  `stagecoach_scheduler_leader ${running.isLeader ? 1 : 0}\n`,
              ),
          },
        });
  running.start();
  log.info('scheduler started: asking for the leadership', { prefix: config.prefix });
  const received = await signal.promise;
  log.info('stopping the scheduler', { signal: received });
  await running.stop();
  await http?.close();
  signal.dispose();
  return EXIT_OK;
}
