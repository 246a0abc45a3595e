import { FairShare, type ShareSeat } from '../runner/intake/fair-share.js';

/** One tenant of a pooled process as the share sees it (its `tenants[]` entry, defaults filled in). */
export interface PreviewSeat {
  tenant: string;
  weight: number;
  maxConcurrency?: number | undefined;
  minConcurrency: number;
}

/** What the share gives one tenant while every tenant of the pool has work. */
export interface SharePreview {
  /** Slots it holds on average (its part of the starts times the slots: jobs take equally long), to 0.1. */
  slots: number;
  /** Its part of the jobs started (0-1), to 0.01. */
  ratio: number;
}

/** Most job ends played: enough for the shares to settle, bounded whatever the configuration. */
const MAX_STEPS = 20_000;

/**
 * Plays a pooled process's own {@link FairShare} (`concurrency` slots, the tenants' weights,
 * minimums and caps) with every tenant always having work and every job taking as long as any
 * other: the oldest running job ends, its slot is granted again. The answer is what the share
 * does then, not a formula beside it, so it follows every rule of the share (a cap passed over,
 * a minimum served first). Real jobs of unequal length, or a tenant with no work, change it.
 */
export function previewShare(concurrency: number, seats: readonly PreviewSeat[]): Map<string, SharePreview> {
  const share = new FairShare(concurrency);
  const running: ShareSeat[] = [];
  const started = new Map<ShareSeat, number>();
  const tenants = new Map<ShareSeat, string>();
  let counting = false;
  let total = 0;
  const joined = seats.map((seat) => {
    const member = {
      startOne: (): boolean => {
        running.push(joinedSeat);
        if (counting) {
          started.set(joinedSeat, (started.get(joinedSeat) ?? 0) + 1);
          total++;
        }
        return true;
      },
      hasWork: (): boolean => true,
    };
    const joinedSeat = share.join(member, {
      weight: seat.weight,
      maxConcurrency: seat.maxConcurrency,
      minConcurrency: seat.minConcurrency,
    });
    tenants.set(joinedSeat, seat.tenant);
    return joinedSeat;
  });
  for (const seat of joined) seat.want();
  const steps = Math.min(MAX_STEPS, Math.max(100 * concurrency, 10 * seats.length));
  // The first round settles the virtual times; the second is counted.
  for (const phase of [false, true]) {
    counting = phase;
    for (let step = 0; step < steps && running.length > 0; step++) {
      const seat = running.shift() as ShareSeat;
      seat.release();
      seat.settled();
      seat.want();
    }
  }
  const previews = new Map<string, SharePreview>();
  for (const seat of joined) {
    // Which seat holds a slot at one moment rotates; the starts over many job ends do not.
    const ratio = total === 0 ? 0 : (started.get(seat) ?? 0) / total;
    previews.set(tenants.get(seat) as string, { slots: Math.round(ratio * concurrency * 10) / 10, ratio: Math.round(ratio * 100) / 100 });
  }
  return previews;
}
