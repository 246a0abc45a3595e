import { Stage, type Job, type StageContext, type StageHandler } from '../src/index.js';

/**
 * The stages the benchmark runs: trivial handlers, so that what is measured is the framework's
 * own path (consume, decode, handler, emit, confirm, ack). Loaded by `loadStage()` from the
 * config (`stages.<name>.module: './bench-stages.js'`); the benchmark imports the same module
 * URL, so `probe` is shared with it when the stages run in the benchmark's own process.
 */

let release: () => void = () => undefined;
let holdGate = new Promise<void>((resolve) => (release = resolve));

export const probe = {
  /** performance.now() and process CPU time (µs) at each stage's first handle() since the last reset. */
  first: new Map<string, { at: number; cpu: number }>(),
  /** Jobs the `hold` stage has in hand (started, not finished). */
  held: 0,
  reset(): void {
    this.first.clear();
    this.held = 0;
    holdGate = new Promise<void>((resolve) => (release = resolve));
  },
  /** Lets every held job of the `hold` stage finish. */
  releaseHold(): void {
    release();
  },
};

function mark(stage: string): void {
  if (!probe.first.has(stage)) {
    const cpu = process.cpuUsage();
    probe.first.set(stage, { at: performance.now(), cpu: cpu.user + cpu.system });
  }
}

/** Relay, forwards: relay_a -> relay_b. */
@Stage({ name: 'relay_ab', input: 'relay_a', outputs: ['relay_b'] })
export class RelayAB implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('relay_ab');
    await ctx.emit('relay_b', { type: job.type, args: job.args });
  }
}

/** Relay, backwards: relay_b -> relay_a (the next round drains what the last one produced). */
@Stage({ name: 'relay_ba', input: 'relay_b', outputs: ['relay_a'] })
export class RelayBA implements StageHandler {
  async handle(job: Job, ctx: StageContext): Promise<void> {
    mark('relay_ba');
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
