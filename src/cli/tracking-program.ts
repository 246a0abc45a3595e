import type { Command } from 'commander';
import { batchList, batchStatus, tracker } from './commands/batch.js';
import { batchDirective } from './commands/directives.js';
import { workflowCancel, workflowList, workflowStatus } from './commands/workflow.js';
import { configOption, tenantOption } from './command-options.js';

/** `stagecoach tracker`, `batch ...` and `workflow ...`: what the tracking stream knows (docs/batches.md, docs/workflows.md). */
export function addTrackingCommands(program: Command): void {
  program
    .command('tracker')
    .description(
      'fold settlement reports into batch state; announce batch.completed (docs/batches.md); advance workflows (docs/workflows.md)',
    )
    .addOption(configOption())
    .action(async (opts: { config?: string }) => {
      process.exitCode = await tracker(opts);
    });
  const batch = program.command('batch').description('batches of jobs: their state, read from the tracking stream');
  batch
    .command('status <batch>')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (id: string, opts: { json?: boolean; config?: string }) => {
      process.exitCode = await batchStatus(id, opts);
    });
  batch
    .command('list')
    .addOption(tenantOption())
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; json?: boolean; config?: string }) => {
      process.exitCode = await batchList(opts);
    });
  for (const [action, description] of [
    ['cancel', 'discard every job of the batch not yet started, where a stage meets it; the batch completes as cancelled'],
    ['pause', 'park every job of the batch where a stage meets it until `batch resume`'],
    ['resume', 'end the pause and send the parked jobs of the batch back where they were going'],
  ] as const) {
    batch
      .command(`${action} <batch>`)
      .description(description)
      .option('--json', 'machine-readable output')
      .addOption(configOption())
      .action(async (id: string, opts: { json?: boolean; config?: string }) => {
        process.exitCode = await batchDirective(action, id, opts);
      });
  }
  const workflow = program
    .command('workflow')
    .description("workflows (chains, groups, batches of jobs): their state and every step's, read from the tracking stream");
  workflow
    .command('status <id>')
    .description("the workflow's state and every step's, nested as the workflow is")
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (id: string, opts: { json?: boolean; config?: string }) => {
      process.exitCode = await workflowStatus(id, opts);
    });
  workflow
    .command('list')
    .addOption(tenantOption())
    .option('--state <state>', 'only workflows in this state: pending, running, completed, failed, cancelled')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (opts: { tenant?: string; state?: string; json?: boolean; config?: string }) => {
      process.exitCode = await workflowList(opts);
    });
  workflow
    .command('cancel <id>')
    .description('what has not started never will; jobs running finish (exit 1 when the workflow has ended)')
    .option('--json', 'machine-readable output')
    .addOption(configOption())
    .action(async (id: string, opts: { json?: boolean; config?: string }) => {
      process.exitCode = await workflowCancel(id, opts);
    });
}
