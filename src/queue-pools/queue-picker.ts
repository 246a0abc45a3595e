import type { PoolPlan } from './queue-pool.js';

/**
 * Chooses, dispatch by dispatch, the queue of a pool the next job comes from, among the queues
 * that have a job waiting (ojs-fair-scheduling 7); a queue with none is skipped and gains nothing
 * meanwhile, so it does not come back with a burst.
 *
 * - `strict`: the first queue in order that has a job.
 * - `round-robin`: the queues in turn, starting after the one served last.
 * - `weighted`: smooth weighted round robin. Each dispatch, every queue with a job gains its
 *   weight in credit; the one with the most credit (the first in order on a tie) is served and
 *   pays the sum of the weights that gained. While the same queues have jobs, a queue of weight w
 *   among weights summing to W is served exactly w times in every W dispatches, spread out rather
 *   than in a run: one of weight > 0 waits at most W dispatches (spec 7.3's bound).
 *
 * One picker per pool (or per worker-specified plan) lives as long as the plan is unchanged, so
 * the turn carries over from one fetch to the next.
 */
export class QueuePicker {
  private readonly credit = new Map<string, number>();
  private cursor = 0;

  constructor(readonly plan: PoolPlan) {
    for (const queue of plan.queues) this.credit.set(queue, 0);
  }

  /** The queue to serve next, among those `hasJob` says have one; undefined when none has. */
  next(hasJob: (queue: string) => boolean): string | undefined {
    const { queues, strategy } = this.plan;
    if (strategy === 'strict') return queues.find(hasJob);
    if (strategy === 'round-robin') {
      for (let step = 0; step < queues.length; step++) {
        const index = (this.cursor + step) % queues.length;
        const queue = queues[index] as string;
        if (!hasJob(queue)) continue;
        this.cursor = (index + 1) % queues.length;
        return queue;
      }
      return undefined;
    }
    let best: string | undefined;
    let total = 0;
    for (const queue of queues) {
      if (!hasJob(queue)) continue;
      const weight = this.plan.weights[queue] ?? 1;
      total += weight;
      const credit = (this.credit.get(queue) ?? 0) + weight;
      this.credit.set(queue, credit);
      if (best === undefined || credit > (this.credit.get(best) ?? 0)) best = queue;
    }
    if (best !== undefined) this.credit.set(best, (this.credit.get(best) ?? 0) - total);
    return best;
  }
}
