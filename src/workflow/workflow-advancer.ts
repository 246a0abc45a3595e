import type { BatchFold, FoldResult } from '../batch/batch-fold.js';
import type { TrackerHost, TrackerPlugin } from '../tracker/tracker.js';
import { declareTopology } from '../broker/declare-topology.js';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import type { PayloadOffloader } from '../payload/payload-offloader.js';
import { coreTopology } from '../topology/build-topology.js';
import { brokerNamesOf } from '../topology/names.js';
import type { TrackingRecord } from '../tracking-stream/tracking-report.js';
import { AdvancerLock } from './advancer-lock.js';
import { StepPublisher, type Advance } from './step-publisher.js';
import { WorkflowFold } from './workflow-fold.js';
import { WorkflowEvents } from './workflow-events.js';

/** The wait before an advance that failed is tried again (after reading the stream up to now). */
const RETRY_MS = 1000;

export interface WorkflowAdvancerOptions {
  config: CompiledConfig;
  log: Logger;
  /** Where `parent_results` and arguments above the payload threshold go; without it they stay inline. */
  payloads?: PayloadOffloader;
  /** False for a reader that only shows workflows: it never takes the lock. @defaultValue true */
  advance?: boolean;
}

/**
 * Advances workflows from the settlement reports a tracker folds (docs/workflows.md): a plugin of
 * the `Tracker` (`stagecoach tracker`, and the admin server's reader). Every reader keeps the
 * workflows' definitions (WorkflowFold); the one holding the workflow lock (AdvancerLock) also
 * publishes what is due, in one transaction per turn with the records that say so
 * (StepPublisher).
 *
 * Exactly once, whoever folds and however often: a step's id is derived from (workflow, step);
 * a step is published only by the holder of the lock, only when the stream it has read says it
 * was not, and together with the `created` record that says it was; the next holder reads the
 * stream up to a mark of its own before it acts. A replay, a duplicate record, a second reader or
 * a SIGKILLed holder therefore never publishes a step twice. `sent` keeps what this process
 * committed until it has read it back.
 */
export class WorkflowAdvancer implements TrackerPlugin {
  readonly workflows: WorkflowFold;
  private lock: AdvancerLock | undefined;
  private publisher: StepPublisher | undefined;
  private events: WorkflowEvents | undefined;
  private host: TrackerHost | undefined;
  private readonly dirty = new Set<string>();
  private readonly sent = new Set<string>();
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(
    fold: BatchFold,
    private readonly options: WorkflowAdvancerOptions,
  ) {
    this.workflows = new WorkflowFold(fold);
  }

  /** A factory for TrackerOptions.plugins. */
  static plugin(options: WorkflowAdvancerOptions): (fold: BatchFold) => WorkflowAdvancer {
    return (fold) => new WorkflowAdvancer(fold, options);
  }

  /** Whether this process holds the lock and publishes steps. */
  get advancing(): boolean {
    return this.lock?.held === true;
  }

  onRecord(record: TrackingRecord, result: FoldResult): void {
    if (record.kind === 'created' || record.kind === 'settled') this.sent.delete(record.job);
    const id = this.workflows.observe(record, result);
    if (id === undefined) return;
    this.dirty.add(id);
    this.kick();
  }

  start(host: TrackerHost): void {
    if (this.options.advance === false || this.closed) return;
    this.host = host;
    const { config, log } = this.options;
    this.publisher = new StepPublisher(config, host.connection, log, this.options.payloads);
    this.events = new WorkflowEvents(config, host.connection, log);
    this.lock = new AdvancerLock(host.connection, brokerNamesOf(config).workflowLock, log, () => void this.taken());
    this.lock.start();
  }

  async settled(): Promise<void> {
    while (this.running !== undefined) await this.running;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.settled();
    await this.lock?.close();
    await this.publisher?.close();
    await this.events?.close();
  }

  /** The lock was taken: read what the last holder committed, then act on every workflow. */
  private async taken(): Promise<void> {
    try {
      // Steps enter by the delay ladder, part of the core topology (with tenant users, provision declared it).
      if (!this.options.config.security.tenantUsers && this.host !== undefined) {
        await declareTopology(this.host.connection, coreTopology(this.options.config), this.options.log);
      }
      await this.host?.caughtUp();
    } catch (err) {
      this.options.log.warn('workflow advancer could not read the stream up to now', { err: (err as Error).message });
      return;
    }
    for (const id of this.workflows.workflows.keys()) {
      // Told of from here on: what the last holder may have told of is not told again.
      const evaluation = this.workflows.evaluate(id, this.sent);
      if (evaluation !== undefined) this.events?.baseline(id, evaluation);
      this.dirty.add(id);
    }
    this.kick();
  }

  private kick(): void {
    if (this.closed || !this.advancing) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.advance().finally(() => {
      this.running = undefined;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    });
  }

  /** Publishes what every dirty workflow has due, in one transaction per round, until none is dirty. */
  private async advance(): Promise<void> {
    while (this.dirty.size > 0 && !this.closed && this.advancing) {
      const ids = [...this.dirty];
      this.dirty.clear();
      const advances: Advance[] = [];
      for (const id of ids) {
        const workflow = this.workflows.workflows.get(id);
        const due = this.workflows.evaluate(id, this.sent);
        if (workflow === undefined || due === undefined) continue;
        this.events?.observe(workflow, due);
        if (due.publish.length > 0 || due.cancel.length > 0) advances.push({ workflow, publish: due.publish, cancel: due.cancel });
      }
      if (advances.length === 0) continue;
      try {
        const committed = await (this.publisher as StepPublisher).commit(advances);
        for (const id of committed) this.sent.add(id);
        this.events?.fired(advances);
      } catch (err) {
        this.options.log.warn('workflow steps not published: trying again', {
          workflows: advances.map((advance) => advance.workflow.id),
          err: (err as Error).message,
        });
        for (const id of ids) this.dirty.add(id);
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        // Whatever the failed commit left, the stream says: read it before deciding again.
        await this.host?.caughtUp().catch(() => undefined);
      }
    }
  }
}
