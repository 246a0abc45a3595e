import { expect } from 'chai';
import { FairShare, type SeatOptions, type ShareSeat } from '../../src/runner/intake/fair-share.js';

/** A tenant with `backlog` jobs waiting; every job it starts is recorded in `order` until ended by the test. */
class Tenant {
  readonly seat: ShareSeat;
  running = 0;

  constructor(
    share: FairShare,
    readonly name: string,
    public backlog: number,
    private readonly order: string[],
    options: SeatOptions = {},
  ) {
    this.seat = share.join({ startOne: () => this.startOne() }, options);
  }

  startOne(): boolean {
    if (this.backlog === 0) return false;
    this.backlog--;
    this.running++;
    this.order.push(this.name);
    return true;
  }

  /** One of its jobs ended. */
  end(): void {
    this.running--;
    this.seat.release();
    if (this.backlog > 0) this.seat.want();
  }
}

/**
 * Runs every job to the end, oldest first, the way slots free up in a process; returns the start
 * order. `afterEach` is called after every job that ends (and the grants it led to).
 */
function drain(share: FairShare, tenants: Tenant[], order: string[], jobs: number, afterEach?: () => void): string[] {
  const inFlight: Tenant[] = [];
  // What runs already are the last starts: slots free up oldest first.
  let seen = order.length - share.inUse;
  for (const tenant of tenants) if (tenant.backlog > 0) tenant.seat.want();
  while (order.length < jobs || inFlight.length > 0) {
    for (; seen < order.length; seen++) inFlight.push(tenants.find((t) => t.name === order[seen]) as Tenant);
    const next = inFlight.shift();
    if (next === undefined) break;
    next.end();
    afterEach?.();
  }
  expect(share.inUse).to.equal(0);
  return order;
}

describe('FairShare', () => {
  it('gives a tenant with 10 jobs a turn between every job of a flood of 1,000', () => {
    const share = new FairShare(4);
    const order: string[] = [];
    const flood = new Tenant(share, 'flood', 1000, order);
    const quiet = new Tenant(share, 'quiet', 10, order);
    drain(share, [flood, quiet], order, 1010);
    const lastQuiet = order.lastIndexOf('quiet');
    expect(lastQuiet, 'start index of the quiet tenant’s last job').to.be.below(25);
  });

  it('shares the slots 3:1 between two busy tenants weighted 3 and 1', () => {
    const share = new FairShare(8);
    const order: string[] = [];
    const heavy = new Tenant(share, 'heavy', 3000, order, { weight: 3 });
    const light = new Tenant(share, 'light', 3000, order, { weight: 1 });
    drain(share, [heavy, light], order, 6000);
    const firstThousand = order.slice(0, 1000);
    const heavyShare = firstThousand.filter((name) => name === 'heavy').length / 1000;
    expect(heavyShare).to.be.closeTo(0.75, 0.01);
  });

  it('shares the jobs in flight 3:1 when settlements, not handlers, bound the throughput (handlers return at once)', () => {
    // Each tenant has its prefetch (30) of deliveries at hand at most; its handler returns as soon as it
    // starts and the job is in flight until its settlement, which the broker confirms oldest first.
    const prefetch = 30;
    const share = new FairShare(20, prefetch);
    const order: string[] = [];
    const settling: Array<{ name: string; seat: ShareSeat }> = [];
    const unsettled = new Map<string, number>([
      ['heavy', 0],
      ['light', 0],
    ]);
    const seats = new Map<string, ShareSeat>();
    for (const [name, weight] of [
      ['heavy', 3],
      ['light', 1],
    ] as const) {
      const seat = share.join(
        {
          startOne: () => {
            if ((unsettled.get(name) as number) >= prefetch) return false; // nothing delivered yet
            unsettled.set(name, (unsettled.get(name) as number) + 1);
            order.push(name);
            settling.push({ name, seat });
            seat.release(); // the handler returned: its slot is free, the job still in flight
            return true;
          },
        },
        { weight },
      );
      seats.set(name, seat);
    }
    for (const seat of seats.values()) seat.want();
    while (order.length < 4000) {
      const oldest = settling.shift();
      if (oldest === undefined) break;
      unsettled.set(oldest.name, (unsettled.get(oldest.name) as number) - 1);
      oldest.seat.settled();
      // The broker delivers the next job in the acknowledged one's place.
      oldest.seat.want();
    }
    const window = order.slice(1000, 4000);
    const heavy = window.filter((name) => name === 'heavy').length;
    expect(heavy / (window.length - heavy)).to.be.closeTo(3, 0.3);
  });

  it('bounds a tenant whose settlements stall to its part of the jobs in flight: the other goes on', () => {
    const share = new FairShare(4, 10);
    let stalled = 0;
    let done = 0;
    const stuck: ShareSeat = share.join({
      startOne: () => {
        stalled++; // its next queue is full: never settles
        stuck.release();
        return true;
      },
    });
    const moving: ShareSeat = share.join({
      startOne: () => {
        done++;
        moving.release();
        queueSettle.push(() => moving.settled());
        return true;
      },
    });
    const queueSettle: Array<() => void> = [];
    stuck.want();
    expect(stalled, 'alone, its part is all of them').to.equal(10);
    moving.want();
    for (let i = 0; i < 200 && queueSettle.length > 0; i++) {
      (queueSettle.shift() as () => void)();
      stuck.want();
      moving.want();
    }
    // It took all 10 while it was alone, and none since: the other tenant's jobs ran beside them.
    expect(stalled).to.equal(10);
    expect(done).to.be.above(150);
  });

  it('gives a lone tenant every job in flight its prefetch allows', () => {
    const share = new FairShare(4, 10);
    let inFlight = 0;
    const seat = share.join({
      startOne: () => {
        inFlight++;
        seat.release();
        return true;
      },
    });
    seat.want();
    expect(inFlight).to.equal(10);
    seat.settled();
    seat.want();
    expect(inFlight).to.equal(11);
  });

  it('never holds more slots for a tenant than its max_concurrency, and lends the rest', () => {
    const share = new FairShare(6);
    const order: string[] = [];
    const capped = new Tenant(share, 'capped', 50, order, { maxConcurrency: 2 });
    const free = new Tenant(share, 'free', 50, order);
    capped.seat.want();
    free.seat.want();
    expect(capped.running).to.equal(2);
    expect(free.running).to.equal(4);
    capped.end();
    expect(capped.running, 'its freed slot goes to whoever is next, within its cap').to.be.at.most(2);
    expect(share.inUse).to.equal(6);
  });

  it('gives a lone tenant every slot (work-conserving)', () => {
    const share = new FairShare(5);
    const order: string[] = [];
    const alone = new Tenant(share, 'alone', 100, order);
    alone.seat.want();
    expect(alone.running).to.equal(5);
  });

  it('earns an idle tenant no credit: back after idling, it takes its share, not the slots it missed', () => {
    const share = new FairShare(2);
    const order: string[] = [];
    const busy = new Tenant(share, 'busy', 200, order);
    const sleeper = new Tenant(share, 'sleeper', 0, order);
    busy.seat.want();
    for (let i = 0; i < 100; i++) busy.end();
    const before = order.length;
    sleeper.backlog = 50;
    drain(share, [busy, sleeper], order, 252);
    const next40 = order.slice(before, before + 40);
    // With credit for its idle time it would take every slot for its 50 jobs.
    expect(next40.filter((name) => name === 'sleeper').length / 40).to.be.within(0.4, 0.6);
  });

  it('leaves a slot free when the tenant granted it has nothing to start after all', () => {
    const share = new FairShare(3);
    const order: string[] = [];
    const empty = new Tenant(share, 'empty', 0, order);
    empty.seat.want();
    expect(share.inUse).to.equal(0);
    const other = new Tenant(share, 'other', 3, order);
    other.seat.want();
    expect(share.inUse).to.equal(3);
  });

  describe('min_concurrency', () => {
    it('holds 3 slots for a tenant with min 3 and weight 1 among 9 flooding tenants of weight 1 (concurrency 10), not its 1 by weight', () => {
      const share = new FairShare(10);
      const order: string[] = [];
      const guaranteed = new Tenant(share, 'guaranteed', 300, order, { minConcurrency: 3 });
      const flood = Array.from({ length: 9 }, (_, i) => new Tenant(share, `flood-${i}`, 1000, order));
      const held: number[] = [];
      let ended = 0;
      // The first tenant to ask takes every slot; from the 100th job that ends on, the share is steady.
      drain(share, [guaranteed, ...flood], order, 9300, () => {
        if (++ended > 100 && guaranteed.backlog > 0) held.push(guaranteed.running);
      });
      expect(held.length).to.be.above(500);
      expect(Math.min(...held), 'fewest slots it held while it had work').to.equal(3);
      expect(Math.max(...held), 'most slots it held while it had work').to.equal(3);
    });

    it('shares by weight above its minimum: min 3 next to one other tenant of the same weight gets half of 10 slots', () => {
      const share = new FairShare(10);
      const order: string[] = [];
      const guaranteed = new Tenant(share, 'guaranteed', 2000, order, { minConcurrency: 3 });
      const other = new Tenant(share, 'other', 2000, order);
      const held: number[] = [];
      let ended = 0;
      drain(share, [other, guaranteed], order, 4000, () => {
        if (++ended > 100 && guaranteed.backlog > 0 && other.backlog > 0) held.push(guaranteed.running);
      });
      expect(Math.min(...held)).to.be.at.least(4);
      expect(Math.max(...held)).to.be.at.most(6);
      expect(order.slice(0, 1000).filter((name) => name === 'guaranteed').length / 1000).to.be.closeTo(0.5, 0.01);
    });

    it('carries no debt from a long flood: once the flood is over, the tenant takes its share by weight at once', () => {
      const share = new FairShare(10);
      const order: string[] = [];
      const guaranteed = new Tenant(share, 'guaranteed', 3000, order, { minConcurrency: 3 });
      const other = new Tenant(share, 'other', 3000, order);
      const flood = Array.from({ length: 8 }, (_, i) => new Tenant(share, `flood-${i}`, 300, order));
      drain(share, [guaranteed, other, ...flood], order, 8400);
      const floodOver = Math.max(...flood.map((tenant) => order.lastIndexOf(tenant.name)));
      expect(floodOver).to.be.below(order.length - 2000);
      const after = order.slice(floodOver + 1, floodOver + 101);
      // Had the guaranteed grants run its virtual time far ahead, `other` would take nearly every slot here.
      expect(after.filter((name) => name === 'guaranteed').length / 100).to.be.within(0.4, 0.6);
    });

    it('gives the slots that free up to a tenant below its minimum first, and keeps none idle for it', () => {
      const share = new FairShare(4);
      const order: string[] = [];
      const flood = new Tenant(share, 'flood', 100, order);
      const late = new Tenant(share, 'late', 0, order, { minConcurrency: 2 });
      flood.seat.want();
      expect(flood.running, 'work-conserving: the flood takes every slot while the other has no work').to.equal(4);
      late.backlog = 50;
      late.seat.want();
      expect(late.running).to.equal(0);
      flood.end();
      expect(late.running).to.equal(1);
      flood.end();
      expect(late.running).to.equal(2);
      expect(flood.running).to.equal(2);
    });

    it('never grants above max_concurrency, even below a minimum it was given', () => {
      const share = new FairShare(10);
      const order: string[] = [];
      const capped = new Tenant(share, 'capped', 100, order, { minConcurrency: 5, maxConcurrency: 2 });
      capped.seat.want();
      expect(capped.running).to.equal(2);
    });
  });
});
