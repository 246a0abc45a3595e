import { sendControl } from '../../control/send-control.js';
import { loadConfig } from '../../config/load-config.js';
import { createLogger } from '../../logging/logger.js';
import type { ControlMessage } from '../../control/control-protocol.js';
import { setQueueState } from '../../queue-state/set-queue-state.js';
import type { QueueState } from '../../queue-state/queue-state.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

const STATE_OF = { pause: 'paused', resume: 'active', drain: 'draining' } as const satisfies Record<string, QueueState>;

/**
 * `stagecoach pause|resume|drain <queue> [--tenant T] [--variant V]`: the queue's state, kept on
 * the broker; prints each physical queue with its state now.
 */
export async function queueStateCommand(
  command: keyof typeof STATE_OF,
  queue: string,
  opts: { tenant?: string; variant?: string; config?: string },
): Promise<number> {
  const tenant = resolveTenant(opts.tenant);
  const config = await loadConfig(opts.config);
  const log = createLogger({ service: 'stagecoach', command });
  const results = await setQueueState(
    config,
    { queue, ...(tenant === undefined ? {} : { tenant }), ...(opts.variant === undefined ? {} : { variant: opts.variant }) },
    STATE_OF[command],
    log,
  );
  for (const result of results) process.stdout.write(`${result.physicalQueue} ${result.state}\n`);
  return EXIT_OK;
}

/** `stagecoach quiet|terminate [--stage S] [--tenant T]`: worker states of running processes. */
export async function workerControl(
  command: 'quiet' | 'terminate',
  target: { stage?: string; tenant?: string; config?: string },
): Promise<number> {
  const tenant = resolveTenant(target.tenant);
  const config = await loadConfig(target.config);
  const message: ControlMessage = {
    command,
    ...(target.stage === undefined ? {} : { stage: target.stage }),
    ...(tenant === undefined ? {} : { tenant }),
  };
  await sendControl(config, message, createLogger({ service: 'stagecoach', command }));
  process.stdout.write(`sent ${command}${message.stage ? ` stage ${message.stage}` : ''}${tenant ? ` tenant ${tenant}` : ''}\n`);
  return EXIT_OK;
}
