import { sendControl } from '../../control/send-control.js';
import { loadConfig } from '../../config/load-config.js';
import { createLogger } from '../../logging/logger.js';
import type { ControlCommand, ControlMessage } from '../../control/control-protocol.js';
import { EXIT_OK } from '../exit-codes.js';
import { resolveTenant } from '../resolve-tenant.js';

/** `stagecoach pause|resume|drain <queue> [--tenant T]` and `stagecoach quiet|terminate [--stage S] [--tenant T]` */
export async function control(
  command: ControlCommand,
  target: { queue?: string; stage?: string; tenant?: string; config?: string },
): Promise<number> {
  const tenant = resolveTenant(target.tenant);
  const config = await loadConfig(target.config);
  const message: ControlMessage = {
    command,
    ...(target.queue === undefined ? {} : { queue: target.queue }),
    ...(target.stage === undefined ? {} : { stage: target.stage }),
    ...(tenant === undefined ? {} : { tenant }),
  };
  await sendControl(config, message, createLogger({ service: 'stagecoach', command }));
  process.stdout.write(
    `sent ${command}${message.queue ? ` ${message.queue}` : ''}${message.stage ? ` stage ${message.stage}` : ''}${tenant ? ` tenant ${tenant}` : ''}\n`,
  );
  return EXIT_OK;
}
