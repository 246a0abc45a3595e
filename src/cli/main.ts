import { Command, CommanderError } from 'commander';
import { EXIT_USAGE, exitCodeFor } from './exit-codes.js';
import { addAdminCommands } from './admin-program.js';
import { configOption, httpPortOption } from './command-options.js';
import { addJobCommands } from './job-program.js';
import { addQueueCommands } from './queue-program.js';
import { addRunCommands } from './run-program.js';
import { addScheduleCommands } from './schedule-program.js';
import { addTopologyCommands } from './topology-program.js';
import { addTrackingCommands } from './tracking-program.js';
import { packageVersion } from '../util/package-version.js';

/** Builds the `stagecoach` program, its commands by role. Every action resolves with its exit code. */
export function buildProgram(): Command {
  const program = new Command('stagecoach')
    .description('Multi-tenant worker pipelines on RabbitMQ')
    .version(packageVersion(), '-V, --version', 'print the version of stagecoach')
    .showHelpAfterError()
    .exitOverride();
  addRunCommands(program);
  addTopologyCommands(program);
  addQueueCommands(program);
  addAdminCommands(program);
  addJobCommands(program);
  addTrackingCommands(program);
  addScheduleCommands(program, configOption, httpPortOption);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version are not errors; anything else commander refuses is bad usage.
      return err.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    process.stderr.write(`stagecoach: ${(err as Error).message}\n`);
    return exitCodeFor(err);
  }
}
