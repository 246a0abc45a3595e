import type { Command } from 'commander';
import { queueStateCommand } from './commands/control.js';
import { dead } from './commands/dead.js';
import { queues } from './commands/queues.js';
import { limits, limitsSet } from './commands/limits.js';
import { unroutableList, unroutableReplay } from './commands/unroutable.js';
import { queueArgument } from './queue-argument.js';
import { configOption, tenantOption } from './command-options.js';

/** Queues and what waits in them: `queues`, `limits`, `dead`, `pause` / `resume` / `drain` and `unroutable` (docs/cli.md). */
export function addQueueCommands(program: Command): void {
  program
    .command('queues')
    .description('every physical queue: state, ready, unacked, consumers, rates, max_size use, due, suspect and dead depth')
    .option('-t, --tenant <tenant>', "only this tenant's queues (a tenant slug)")
    .option('--json', 'machine-readable output (every queue, whatever --limit says)')
    .option('--limit <n>', 'table rows at most, 0 for all (default 200)')
    .option('--offset <n>', 'table rows skipped (default 0)')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; json?: boolean; config?: string; limit?: string; offset?: string }) => {
      process.exitCode = await queues(opts);
    });

  const limitsCommand = program
    .command('limits')
    .description('flow-limit partitions on the broker: limit, active, starts in the window (docs/flow-control.md)')
    .option('--key <key>', 'only this partition')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { key?: string; json?: boolean; config?: string }) => {
      process.exitCode = await limits(opts);
    });
  limitsCommand
    .command('set <key>')
    .description('replace limits.<key> in the configuration file; running stages take it within a second')
    .option('--concurrency <n>', 'most jobs holding it active at once, across every process')
    .option('--rate <n/period>', 'most starts in any window, e.g. 50/PT1S')
    .option('--throttle <n/period>', 'starts spaced evenly, e.g. 10/PT1S')
    .option('--per-tenant', 'one partition per tenant')
    .addOption(configOption())
    .action(async (key: string, opts: { concurrency?: string; rate?: string; throttle?: string; perTenant?: boolean; config?: string }) => {
      // `limits` takes --config too, and commander gives it to `limits` wherever it is written.
      const config = opts.config ?? limitsCommand.opts<{ config?: string }>().config;
      process.exitCode = await limitsSet(key, { ...opts, ...(config === undefined ? {} : { config }) });
    });

  program
    .command('dead <action>')
    .addArgument(queueArgument())
    .description('dead letters of a queue: list (look), retry (send back with a fresh attempt count), purge (drop)')
    .addOption(tenantOption())
    .option('--limit <n>', 'most messages to list', '100')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (action: string, queue: string, opts: { tenant?: string; json?: boolean; limit: string; config?: string }) => {
      process.exitCode = await dead(action, queue, opts);
    });

  for (const [command, description] of [
    ['pause', 'stages stop consuming the queue (jobs in flight finish); it still takes new jobs. Kept on the broker until resumed'],
    ['resume', 'the queue is active again: stages consume it, and a draining queue takes new jobs again'],
    ['drain', 'the queue takes no new jobs (they are kept in unroutable) while stages empty it. Kept on the broker until resumed'],
  ] as const) {
    program
      .command(command)
      .addArgument(queueArgument())
      .description(description)
      .addOption(tenantOption())
      .option('--variant <variant>', 'only this variant queue (pause and resume; a drain is the whole queue)')
      .addOption(configOption())
      .action(async (queue: string, opts: { tenant?: string; variant?: string; config?: string }) => {
        process.exitCode = await queueStateCommand(command, queue, opts);
      });
  }

  const unroutable = program.command('unroutable').description('the queue of jobs no queue would take');
  unroutable
    .command('list')
    .option('--limit <n>', 'most messages to show', '100')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { limit: string; json?: boolean; config?: string }) => {
      process.exitCode = await unroutableList(opts);
    });
  unroutable
    .command('replay')
    .description('send jobs back to their tenant or queue, where one exists now')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { json?: boolean; config?: string }) => {
      process.exitCode = await unroutableReplay(opts);
    });
}
