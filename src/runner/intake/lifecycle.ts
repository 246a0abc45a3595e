/**
 * The states of a stage runner: the worker states of the Open Job Spec (https://openjobspec.org:
 * `running`, `quiet`, `terminate` as stopping) plus queue pause (docs/operations.md).
 *
 *   starting --> running <--> paused
 *                   |            |
 *                   +--> quiet <-+
 *   (any) ------------------------------> stopping --> stopped
 *
 * `running` consumes; `paused` stops consuming until resumed; `quiet` stops consuming for good
 * but finishes what it has; `stopping` drains the jobs in flight within the grace period;
 * `stopped` has closed its channels. Only `running` takes new deliveries.
 */
export type RunnerState = 'starting' | 'running' | 'paused' | 'quiet' | 'stopping' | 'stopped';

const NEXT: Record<RunnerState, readonly RunnerState[]> = {
  starting: ['running', 'stopping'],
  running: ['paused', 'quiet', 'stopping'],
  paused: ['running', 'quiet', 'stopping'],
  quiet: ['stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/**
 * Holds the state and its transitions; a transition that the diagram does not allow is ignored
 * (`to()` returns false), so a `resume` racing a `stop` can never restart a stopping runner.
 *
 * `stop()` runs the given shutdown once and stores its promise: every later call, whoever makes
 * it (a `terminate` control message, then SIGTERM), waits for that same shutdown and gets its
 * result, instead of reporting a drain that has not happened.
 */
export class Lifecycle {
  private current: RunnerState = 'starting';
  private stopped: Promise<boolean> | undefined;

  constructor(private readonly onChange: (state: RunnerState) => void = () => undefined) {}

  get state(): RunnerState {
    return this.current;
  }

  /** True from the first `stop()` on. */
  get stopping(): boolean {
    return this.current === 'stopping' || this.current === 'stopped';
  }

  /** Moves to `state` if the diagram allows it; returns whether it moved. */
  to(state: RunnerState): boolean {
    if (!NEXT[this.current].includes(state)) return false;
    this.current = state;
    this.onChange(state);
    return true;
  }

  /**
   * Enters `stopping`, runs `shutdown` once, then enters `stopped`.
   * @returns the shutdown's result, to the first caller and to every later one.
   */
  stop(shutdown: () => Promise<boolean>): Promise<boolean> {
    if (this.stopped !== undefined) return this.stopped;
    // Stored before the shutdown starts: `onChange('stopping')` runs inside it, and a listener
    // that calls stop() there must get this promise, not run a second shutdown.
    let run: (shutdown: Promise<boolean>) => void = () => undefined;
    this.stopped = new Promise<boolean>((resolve) => (run = resolve));
    run(
      (async () => {
        this.to('stopping');
        try {
          return await shutdown();
        } finally {
          this.to('stopped');
        }
      })(),
    );
    return this.stopped;
  }
}
