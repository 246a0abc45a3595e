import { QueuePicker } from './queue-picker.js';
import type { PoolPlan } from './queue-pool.js';

/** Most pickers kept: beyond it the least recently used is dropped (its turn starts over). */
export const MAX_PICKERS = 1024;

/**
 * The pickers of the fetches of this server, by plan and tenant: a tenant's fetches keep their
 * own turn, so one tenant's fetches never move another's. A plan changed (a pool redefined, a
 * worker asking for other weights) is another key, and starts a turn of its own. Bounded: a
 * caller inventing plans only pushes out old pickers.
 */
export class PickerCache {
  private readonly pickers = new Map<string, QueuePicker>();

  of(plan: PoolPlan, scope: string): QueuePicker {
    const key = JSON.stringify([scope, plan.strategy, plan.queues, plan.queues.map((queue) => plan.weights[queue] ?? 1)]);
    let picker = this.pickers.get(key);
    if (picker !== undefined) this.pickers.delete(key);
    else picker = new QueuePicker(plan);
    // Re-inserted: a Map keeps insertion order, so the first key is the least recently used.
    this.pickers.set(key, picker);
    if (this.pickers.size > MAX_PICKERS) this.pickers.delete(this.pickers.keys().next().value as string);
    return picker;
  }

  get size(): number {
    return this.pickers.size;
  }
}
