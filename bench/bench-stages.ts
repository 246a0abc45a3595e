import { Stage, type Job, type StageContext, type StageHandler } from '../src/index.js';
import { brokerCpuNow } from './broker-cpu.js';

/**
 * The stages the benchmark runs: trivial handlers, so that what is measured is the framework's
 * own path (consume, decode, handler, emit, confirm, ack). Loaded by `loadStage()` from the
 * config (`stages.<name>.module: './bench-stages.js'`); the benchmark imports the same module
 * URL, so `probe` is shared with it when the stages run in the benchmark's own process.
 */

let release: () => void = () => undefined;
let holdGate = new Promise<void>((resolve) => (release = resolve));
let openFair: () => void = () => undefined;
/** Closed (a promise) only while the pooled scenario starts a relay: see probe.gateRelay. */
let relayGate: Promise<void> | undefined;
let openRelay: () => void = () => undefined;
let fairGate = new Promise<void>((resolve) => (openFair = resolve));

export const probe = {
  /** performance.now() and process CPU time (µs) at each stage's first handle() since the last reset. */
  first: new Map<string, { at: number; cpu: number; broker: number | undefined }>(),
  /** Jobs the `hold` stage has in hand (started, not finished). */
  held: 0,
  /**
   * Fairness: every job the `fair` and `weighted` stages finished, in order: its tenant and the
   * performance.now() its handler ended (two parallel arrays, cheap to append to).
   */
  completions: { tenants: [] as string[], at: [] as number[] },
  reset(): void {
    this.first.clear();
    this.held = 0;
    this.completions = { tenants: [], at: [] };
    fairGate = new Promise<void>((resolve) => (openFair = resolve));
    holdGate = new Promise<void>((resolve) => (release = resolve));
  },
  /**
   * Lets the `fair` and `weighted` stages' handlers start (they wait from the last reset): the
   * bench opens it once every tenant of the pooled process consumes, so that the share is
   * measured with every tenant's deliveries at hand, not the order the tenants attached in.
   */
  openFairGate(): void {
    openFair();
  },
  /**
   * The `relay_*` stages' handlers wait from now until `openRelayGate()` (the pooled scenario:
   * timed once every tenant consumes). Open otherwise, at no cost (no await).
   */
  gateRelay(): void {
    relayGate = new Promise<void>((resolve) => (openRelay = resolve));
  },
  openRelayGate(): void {
    openRelay();
    relayGate = undefined;
  },
  /** Lets every held job of the `hold` stage finish. */
  releaseHold(): void {
    release();
  },
};

export function mark(stage: string): void {
  if (!probe.first.has(stage)) {
    const cpu = process.cpuUsage();
    probe.first.set(stage, { at: performance.now(), cpu: cpu.user + cpu.system, broker: brokerCpuNow() });
  }
}

/** Relay, forwards: relay_a -> relay_b. */
@Stage({ name: 'relay_ab', input: 'relay_a', outputs: ['relay_b'] })
export class RelayAB implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('relay_ab');
    if (relayGate !== undefined) await relayGate;
    await ctx.emit('relay_b', { type: job.type, args: job.args });
  }
}

/** Relay, backwards: relay_b -> relay_a (the next round drains what the last one produced). */
@Stage({ name: 'relay_ba', input: 'relay_b', outputs: ['relay_a'] })
export class RelayBA implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('relay_ba');
    if (relayGate !== undefined) await relayGate;
    await ctx.emit('relay_a', { type: job.type, args: job.args });
  }
}

/** Relay on quorum queues (scenario `quorum`), forwards: qrelay_a -> qrelay_b. */
@Stage({ name: 'qrelay_ab', input: 'qrelay_a', outputs: ['qrelay_b'] })
export class QuorumRelayAB implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('qrelay_ab');
    await ctx.emit('qrelay_b', { type: job.type, args: job.args });
  }
}

/** Relay on quorum queues, backwards: qrelay_b -> qrelay_a. */
@Stage({ name: 'qrelay_ba', input: 'qrelay_b', outputs: ['qrelay_a'] })
export class QuorumRelayBA implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('qrelay_ba');
    await ctx.emit('qrelay_a', { type: job.type, args: job.args });
  }
}

/** Relay of batched jobs (scenario `tracking`), forwards: trk_a -> trk_b. The relay's handler, other queues. */
@Stage({ name: 'trk_ab', input: 'trk_a', outputs: ['trk_b'] })
export class TrackedRelayAB implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('trk_ab');
    await ctx.emit('trk_b', { type: job.type, args: job.args });
  }
}

/** Relay of batched jobs, backwards: trk_b -> trk_a. */
@Stage({ name: 'trk_ba', input: 'trk_b', outputs: ['trk_a'] })
export class TrackedRelayBA implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('trk_ba');
    await ctx.emit('trk_a', { type: job.type, args: job.args });
  }
}

/** Relay of tracked jobs (scenario `jobstate`, queues with `tracking` on), forwards: js_a -> js_b. */
@Stage({ name: 'js_ab', input: 'js_a', outputs: ['js_b'] })
export class JobStateRelayAB implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('js_ab');
    await ctx.emit('js_b', { type: job.type, args: job.args });
  }
}

/** Relay of tracked jobs, backwards: js_b -> js_a. */
@Stage({ name: 'js_ba', input: 'js_b', outputs: ['js_a'] })
export class JobStateRelayBA implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('js_ba');
    await ctx.emit('js_a', { type: job.type, args: job.args });
  }
}

/** Large jobs (scenario `payloads`), sent inline (their queues' threshold is above them): pl_inline_a -> pl_inline_b. */
@Stage({ name: 'pl_inline_ab', input: 'pl_inline_a', outputs: ['pl_inline_b'] })
export class InlineRelayAB implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('pl_inline_ab');
    await ctx.emit('pl_inline_b', { type: job.type, args: job.args });
  }
}

/** Large jobs inline, backwards: pl_inline_b -> pl_inline_a. */
@Stage({ name: 'pl_inline_ba', input: 'pl_inline_b', outputs: ['pl_inline_a'] })
export class InlineRelayBA implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('pl_inline_ba');
    await ctx.emit('pl_inline_a', { type: job.type, args: job.args });
  }
}

/** Large jobs offloaded (the default threshold, below them): pl_off_a -> pl_off_b, the arguments loaded and stored again. */
@Stage({ name: 'pl_off_ab', input: 'pl_off_a', outputs: ['pl_off_b'] })
export class OffloadedRelayAB implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('pl_off_ab');
    await ctx.emit('pl_off_b', { type: job.type, args: job.args });
  }
}

/** Large jobs offloaded, backwards: pl_off_b -> pl_off_a. */
@Stage({ name: 'pl_off_ba', input: 'pl_off_b', outputs: ['pl_off_a'] })
export class OffloadedRelayBA implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('pl_off_ba');
    await ctx.emit('pl_off_a', { type: job.type, args: job.args });
  }
}

/** The end of the offloaded backlog (scenario `payloads`): completes every job, emits nothing; its payloads must go. */
@Stage({ name: 'pl_drain_a', input: 'pl_off_a', outputs: [] })
export class DrainA implements StageHandler {
  async handle(): Promise<void> {
    mark('pl_drain_a');
  }
}

@Stage({ name: 'pl_drain_b', input: 'pl_off_b', outputs: [] })
export class DrainB implements StageHandler {
  async handle(): Promise<void> {
    mark('pl_drain_b');
  }
}

/**
 * Pipeline of the example's shape: three tenant-scoped hops through the root exchange. The six
 * queues p_0 .. p_5 form a ring: the hand-written pipeline moves the backlog p_0 -> p_3, these
 * stages move it on p_3 -> p_4 -> p_5 -> p_0, so no round needs a refill.
 */
@Stage({ name: 'pipe1', input: 'p_3', outputs: ['p_4'] })
export class Pipe1 implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('pipe1');
    await ctx.emit('p_4', { type: job.type, args: job.args });
  }
}

@Stage({ name: 'pipe2', input: 'p_4', outputs: ['p_5'] })
export class Pipe2 implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('pipe2');
    await ctx.emit('p_5', { type: job.type, args: job.args });
  }
}

@Stage({ name: 'pipe3', input: 'p_5', outputs: ['p_0'] })
export class Pipe3 implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('pipe3');
    await ctx.emit('p_0', { type: job.type, args: job.args });
  }
}

/** Memory: holds every delivery it gets until released, so the backlog stays in the queue. */
@Stage({ name: 'hold', input: 'mem_in', outputs: [] })
export class Hold implements StageHandler {
  async handle(): Promise<void> {
    mark('hold');
    probe.held++;
    try {
      await holdGate;
    } finally {
      probe.held--;
    }
  }
}

/** Waits for the fairness gate, takes args[0] ms (a timer, no CPU), then records which tenant's job finished when. */
async function timedJob(job: Job): Promise<void> {
  await fairGate;
  const ms = Number(job.args[0] ?? 0);
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  probe.completions.tenants.push(job.tenant ?? '');
  probe.completions.at.push(performance.now());
}

/** Fairness (flood against quiet tenants), run pooled: a short fixed-time handler. */
@Stage({ name: 'fair', input: 'fair_in', outputs: [] })
export class Fair implements StageHandler {
  async handle(job: Job): Promise<void> {
    mark('fair');
    await timedJob(job);
  }
}

/** Fairness (weights 3:1), run pooled with a concurrency of its own: the same handler. */
@Stage({ name: 'weighted', input: 'weighted_in', outputs: [] })
export class Weighted implements StageHandler {
  async handle(job: Job): Promise<void> {
    mark('weighted');
    await timedJob(job);
  }
}

/**
 * Fairness (weights 3:1) with a short handler that emits, as a relay's does: slots free up at
 * once, and the jobs in flight until their emits are confirmed and they are acknowledged are what
 * bounds the throughput.
 */
@Stage({ name: 'weighted_emit', input: 'weighted_emit_in', outputs: ['weighted_emit_out'] })
export class WeightedEmit implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('weighted_emit');
    await timedJob(job);
    await ctx.emit('weighted_emit_out', { type: job.type, args: job.args });
  }
}

/** Fairness (weights 3:1) again, with a deeper `tenant_prefetch` configured (its own queue). */
@Stage({ name: 'weighted_deep', input: 'weighted_deep_in', outputs: [] })
export class WeightedDeep implements StageHandler {
  async handle(job: Job): Promise<void> {
    mark('weighted_deep');
    await timedJob(job);
  }
}

/** Workflows (bench/workflows.ts): one step, nothing to do; counted by its runner's stats. */
@Stage({ name: 'wf_step', input: 'wf_steps', outputs: [] })
export class WorkflowStep implements StageHandler {
  handle(): Promise<void> {
    mark('wf_step');
    return Promise.resolve();
  }
}
