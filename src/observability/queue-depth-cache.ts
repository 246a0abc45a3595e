import { settleWithin } from '../util/settle-within.js';
import type { QueueDepthSample } from './stage-metrics.js';

/** How often the depths are read from the broker. */
export const DEPTH_SAMPLE_MS = 15_000;
/** How long one reading may take before it counts as failed (the scrape then shows no depths). */
export const DEPTH_SAMPLE_TIMEOUT_MS = 5_000;

/**
 * The queue depths `/metrics` serves, read from the broker in the background, never at scrape
 * time: a scrape answers at once from the last reading, whatever the broker does (a connection
 * cut without a reset would otherwise hold every scrape for the whole timeout). One reading at a
 * time: one the broker never answers is not repeated on top of itself; the next starts once it
 * settled. A reading that failed or timed out, or one older than three periods, is not served
 * (stale depths would mislead): `read()` throws why, and the scrape shows no depth series.
 *
 * Lifecycle: `start()` reads at once, then every `intervalMs`; `stop()` ends the readings.
 */
export class QueueDepthCache {
  private latest: { samples: readonly QueueDepthSample[]; takenAt: number } | undefined;
  private failure: Error | undefined;
  private sampling = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly sample: () => Promise<readonly QueueDepthSample[]>,
    private readonly intervalMs = DEPTH_SAMPLE_MS,
    private readonly timeoutMs = DEPTH_SAMPLE_TIMEOUT_MS,
    private readonly clock: () => number = Date.now,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.refresh(), this.intervalMs);
    this.timer.unref();
    void this.refresh();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** The last reading, at once; throws when there is none to trust (nothing read yet counts as none to show). */
  read(): readonly QueueDepthSample[] {
    if (this.failure !== undefined) throw this.failure;
    if (this.latest === undefined) return [];
    const age = this.clock() - this.latest.takenAt;
    if (age > 3 * this.intervalMs) throw new Error(`the last queue depth reading is ${Math.round(age / 1000)} s old`);
    return this.latest.samples;
  }

  /** One reading, unless one is under way; public for tests. */
  async refresh(): Promise<void> {
    if (this.sampling) return;
    this.sampling = true;
    const reading = this.sample().then(
      (samples) => ({ samples }),
      (err: unknown) => ({ err: err instanceof Error ? err : new Error(String(err)) }),
    );
    void reading.finally(() => (this.sampling = false));
    const result = await settleWithin(reading, this.timeoutMs);
    if (result === undefined) this.failure = new Error(`queue depths: the broker did not answer within ${this.timeoutMs} ms`);
    else if ('err' in result) this.failure = result.err;
    else {
      this.latest = { samples: result.samples, takenAt: this.clock() };
      this.failure = undefined;
    }
  }
}
