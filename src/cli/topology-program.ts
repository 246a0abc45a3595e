import { Option, type Command } from 'commander';
import { provision, printTopology } from './commands/topology.js';
import { apply, plan } from './commands/plan.js';
import { queueDelete, tenantRetire } from './commands/remove.js';
import { tenantDirective } from './commands/directives.js';
import { queueArgument, queueName } from './queue-argument.js';
import { configOption, tenantOption } from './command-options.js';

/** What is on the broker: `provision`, `plan`, `apply`, `topology`, `tenant ...` and `queue delete` (docs/cli.md). */
export function addTopologyCommands(program: Command): void {
  program
    .command('provision')
    .description('declare all exchanges, queues and bindings, for one tenant or all')
    .addOption(tenantOption())
    .addOption(configOption())
    .action(async (opts: { tenant?: string; config?: string }) => {
      process.exitCode = await provision(opts);
    });

  program
    .command('plan')
    .description('print the difference between the configuration and the broker; exit 0 when nothing differs, 3 when something does')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { json?: boolean; config?: string }) => {
      process.exitCode = await plan(opts);
    });

  program
    .command('apply')
    .description('carry out the plan (declare what is missing, change queue settings); never deletes a queue or a job')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { json?: boolean; config?: string }) => {
      process.exitCode = await apply(opts);
    });

  program
    .command('topology')
    .description('print what would be declared, without touching the broker')
    .addOption(tenantOption())
    .option('--stage <stage>', 'only what `run <stage>` declares')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; stage?: string; json?: boolean; config?: string }) => {
      process.exitCode = await printTopology(opts);
    });

  const strategyOption = (): Option =>
    new Option(
      '--strategy <strategy>',
      'what happens to the jobs: reject (refuse while any remain), discard (drop them), move (to --target)',
    )
      .choices(['reject', 'discard', 'move'])
      .makeOptionMandatory();
  const tenant = program.command('tenant').description('tenants on the broker');
  tenant
    .command('retire <tenant>')
    .description('remove a tenant and everything of it on the broker: queues, exchanges, bindings, policies, broker users')
    .addOption(strategyOption())
    .option('--target <queue>', 'with --strategy move: the shared queue its jobs go to', queueName('--target'))
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (name: string, opts: { strategy: string; target?: string; json?: boolean; config?: string }) => {
      process.exitCode = await tenantRetire(name, opts);
    });
  for (const [action, description] of [
    ['pause', 'park every job of the tenant where a stage meets it (every stage, shared queues too) until `tenant resume`'],
    ['resume', 'end the pause and send the parked jobs of the tenant back where they were going'],
  ] as const) {
    tenant
      .command(`${action} <tenant>`)
      .description(description)
      .option('--json', 'machine-readable output')
      .addOption(configOption())
      .action(async (name: string, opts: { json?: boolean; config?: string }) => {
        process.exitCode = await tenantDirective(action, name, opts);
      });
  }
  const queue = program.command('queue').description('logical queues on the broker');
  queue
    .command('delete')
    .addArgument(queueArgument())
    .description('remove a logical queue (for one tenant, or all): its queues, variant routers, bindings and policies')
    .addOption(tenantOption())
    .addOption(strategyOption())
    .option('--target <queue>', "with --strategy move: the queue its jobs go to (each tenant's own)", queueName('--target'))
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (name: string, opts: { tenant?: string; strategy: string; target?: string; json?: boolean; config?: string }) => {
      process.exitCode = await queueDelete(name, opts);
    });
}
