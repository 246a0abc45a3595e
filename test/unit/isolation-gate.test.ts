import { expect } from 'chai';
import type { Logger } from '../../src/logging/logger.js';
import { IsolationGate, type Isolatable } from '../../src/runner/intake/isolation-gate.js';
import { waitFor } from '../helpers/wait-for.js';

/** Lets promise callbacks run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * A member whose suspend() finishes when the test says so (or at once when `instant`), with
 * every call recorded in a log shared by the test.
 */
class Member implements Isolatable {
  suspensions = 0;
  /** suspend() calls whose promise has resolved. */
  idle = 0;
  private pending: Array<() => void> = [];

  constructor(
    readonly name: string,
    private readonly log: string[],
    private instant = true,
  ) {}

  get suspended(): boolean {
    return this.suspensions > 0;
  }

  suspend(): Promise<void> {
    this.suspensions++;
    this.log.push(`${this.name} suspend`);
    const done = (): void => {
      this.idle++;
      this.log.push(`${this.name} idle`);
    };
    if (this.instant) {
      done();
      return Promise.resolve();
    }
    return new Promise<void>((resolve) =>
      this.pending.push(() => {
        done();
        resolve();
      }),
    );
  }

  /** Lets the pending suspend() calls resolve (its jobs in flight finished). */
  drain(): void {
    for (const release of this.pending.splice(0)) release();
  }

  /** Its stuck job ended: the pending suspend() calls resolve, and later ones at once. */
  unstick(): void {
    this.instant = true;
    this.drain();
  }

  unsuspend(): void {
    this.suspensions--;
    this.log.push(`${this.name} unsuspend`);
  }
}

/** A function run alone that finishes when the test says so. */
function controlled(log: string[], name: string): { fn: () => Promise<string>; finish: () => void; fail: (err: Error) => void } {
  let finish: () => void = () => undefined;
  let fail: (err: Error) => void = () => undefined;
  const fn = (): Promise<string> => {
    log.push(`${name} runs`);
    return new Promise<string>((resolve, reject) => {
      finish = () => {
        log.push(`${name} ends`);
        resolve(name);
      };
      fail = reject;
    });
  };
  return { fn, finish: () => finish(), fail: (err) => fail(err) };
}

describe('IsolationGate', () => {
  it('suspends every member, and waits for each suspend to resolve, before fn runs', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log, false);
    const b = new Member('b', log, false);
    gate.join(a);
    gate.join(b);
    const call = controlled(log, 'fn');
    const result = gate.runAlone(call.fn);
    await settle();
    expect(a.suspended && b.suspended).to.equal(true);
    expect(gate.isolating).to.equal(true);
    expect(log, 'fn waits for the members to be idle').to.deep.equal(['a suspend', 'b suspend']);
    a.drain();
    await settle();
    expect(log).to.not.include('fn runs');
    b.drain();
    await settle();
    expect(log).to.deep.equal(['a suspend', 'b suspend', 'a idle', 'b idle', 'fn runs']);
    call.finish();
    expect(await result).to.equal('fn');
    expect(a.suspended || b.suspended).to.equal(false);
    expect(gate.isolating).to.equal(false);
    expect(log.slice(-3)).to.have.members(['fn ends', 'a unsuspend', 'b unsuspend']);
    expect(log.indexOf('a unsuspend')).to.be.greaterThan(log.indexOf('fn ends'));
  });

  it('unsuspends every member when fn throws, and passes the error on', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log);
    const b = new Member('b', log);
    gate.join(a);
    gate.join(b);
    const boom = new Error('suspect crashed');
    const err = await gate
      .runAlone(async () => {
        expect(a.suspended && b.suspended).to.equal(true);
        throw boom;
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).to.equal(boom);
    expect(a.suspensions).to.equal(0);
    expect(b.suspensions).to.equal(0);
    expect(gate.isolating).to.equal(false);
    // The gate still works after a failed call.
    expect(await gate.runAlone(() => Promise.resolve(7))).to.equal(7);
    expect(a.suspensions).to.equal(0);
  });

  it('unsuspends every member when a suspend rejects, and fn does not run', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log);
    const broken: Isolatable & { unsuspended: number } = {
      unsuspended: 0,
      suspend: () => Promise.reject(new Error('cannot cancel consumers')),
      unsuspend() {
        this.unsuspended++;
      },
    };
    gate.join(a);
    gate.join(broken);
    let ran = false;
    const err = await gate
      .runAlone(async () => {
        ran = true;
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect((err as Error).message).to.equal('cannot cancel consumers');
    expect(ran).to.equal(false);
    expect(a.suspensions).to.equal(0);
    expect(broken.unsuspended).to.equal(1);
  });

  it('never overlaps two runAlone calls, and runs a call made during a window in that window: one suspension for both', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log);
    gate.join(a);
    const first = controlled(log, 'first');
    const second = controlled(log, 'second');
    const one = gate.runAlone(first.fn);
    const two = gate.runAlone(second.fn);
    await settle();
    expect(log).to.include('first runs');
    expect(log).to.not.include('second runs');
    first.finish();
    await settle();
    expect(log).to.include('second runs');
    expect(a.suspended, 'still suspended: the window is still open').to.equal(true);
    second.finish();
    expect(await one, 'each caller answered once the window closed').to.equal('first');
    expect(await two).to.equal('second');
    expect(log).to.deep.equal(['a suspend', 'a idle', 'first runs', 'first ends', 'second runs', 'second ends', 'a unsuspend']);
    expect(a.suspensions).to.equal(0);
    expect(gate.isolating).to.equal(false);
  });

  it('opens a new window for a call made after the last one closed', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log);
    gate.join(a);
    expect(await gate.runAlone(() => Promise.resolve(1))).to.equal(1);
    await settle();
    expect(await gate.runAlone(() => Promise.resolve(2))).to.equal(2);
    await settle();
    expect(log).to.deep.equal(['a suspend', 'a idle', 'a unsuspend', 'a suspend', 'a idle', 'a unsuspend']);
  });

  it('runs the next call even when the one before it failed', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const first = controlled(log, 'first');
    const one = gate.runAlone(first.fn);
    const two = gate.runAlone(() => Promise.resolve('second'));
    await settle();
    expect(log).to.deep.equal(['first runs']);
    first.fail(new Error('boom'));
    await one.catch(() => undefined);
    expect(await two).to.equal('second');
  });

  it('a member joining during a call starts suspended and is released at its end', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log);
    gate.join(a);
    const call = controlled(log, 'fn');
    const result = gate.runAlone(call.fn);
    await settle();
    expect(log).to.include('fn runs');
    const late = new Member('late', log);
    gate.join(late);
    expect(late.suspended).to.equal(true);
    call.finish();
    await result;
    expect(late.suspensions).to.equal(0);
    expect(log.filter((line) => line.startsWith('late'))).to.deep.equal(['late suspend', 'late idle', 'late unsuspend']);
    // Joining outside a call suspends nothing.
    const calm = new Member('calm', log);
    gate.join(calm);
    expect(calm.suspended).to.equal(false);
  });

  it('a member joining while the others are being suspended is released at the end too', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log, false);
    gate.join(a);
    const call = controlled(log, 'fn');
    const result = gate.runAlone(call.fn);
    await settle();
    const late = new Member('late', log);
    gate.join(late);
    expect(late.suspended).to.equal(true);
    a.drain();
    await settle();
    call.finish();
    await result;
    expect(a.suspensions).to.equal(0);
    expect(late.suspensions).to.equal(0);
  });

  it('leave() releases a member suspended by a call, once; the call does not release it again', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log);
    const b = new Member('b', log);
    gate.join(a);
    gate.join(b);
    const call = controlled(log, 'fn');
    const result = gate.runAlone(call.fn);
    await settle();
    expect(a.suspended).to.equal(true);
    gate.leave(a);
    expect(a.suspensions).to.equal(0);
    call.finish();
    await result;
    expect(a.suspensions, 'not unsuspended twice').to.equal(0);
    expect(log.filter((line) => line === 'a unsuspend')).to.have.length(1);
    expect(b.suspensions).to.equal(0);
    // A member that left is not suspended by later calls.
    await gate.runAlone(() => Promise.resolve());
    expect(log.filter((line) => line === 'a suspend')).to.have.length(1);
  });

  it('leave() outside a call does not unsuspend the member', () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log);
    gate.join(a);
    gate.leave(a);
    expect(log).to.deep.equal([]);
  });
});

describe('IsolationGate with a job in flight that does not end', () => {
  it('gives up past idleWithinMs: the calls are refused, every member runs again, and no window opens until retryAfterMs has passed', async function () {
    this.timeout(10_000);
    const log: string[] = [];
    const warnings: string[] = [];
    const logger = { warn: (message: string) => warnings.push(message) } as unknown as Logger;
    const gate = new IsolationGate({ idleWithinMs: 30, retryAfterMs: 300, log: logger });
    const a = new Member('a', log);
    const stuck = new Member('stuck', log, false);
    gate.join(a);
    gate.join(stuck);
    let ran = 0;
    const fn = async (): Promise<string> => {
      ran++;
      return 'ran';
    };
    const refused = await gate.runAlone(fn).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(refused?.message).to.match(/gave up: the process's jobs in flight did not end within 30 ms/);
    expect(ran, 'no suspect runs beside a job in flight').to.equal(0);
    expect(a.suspended || stuck.suspended, 'every member runs again').to.equal(false);
    expect(gate.isolating).to.equal(false);
    expect(warnings).to.have.length(1);

    // Refused at once meanwhile: nobody is suspended again for the job that may still not end.
    const suspensions = log.filter((entry) => entry.endsWith('suspend')).length;
    const again = await gate.runAlone(fn).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(again?.message).to.match(/isolation refused until/);
    expect(log.filter((entry) => entry.endsWith('suspend')).length).to.equal(suspensions);

    // The job ends; once retryAfterMs has passed, a window opens and runs its call.
    stuck.unstick();
    const later = await waitFor(
      'a window after retryAfterMs',
      () =>
        gate.runAlone(fn).then(
          (value) => value,
          () => false as const,
        ),
      5_000,
      50,
    );
    expect(later).to.equal('ran');
    expect(ran).to.equal(1);
  });
});

describe('IsolationGate while the process attaches', () => {
  it('opens no window until every attach in progress has ended: members joining meanwhile consume first', async () => {
    const log: string[] = [];
    const gate = new IsolationGate();
    const a = new Member('a', log);
    gate.join(a);
    let attached: () => void = () => undefined;
    const attaching = gate.whileAttaching(() => new Promise<void>((resolve) => (attached = resolve)));
    const call = gate.runAlone(() => Promise.resolve('ran'));
    await settle();
    const b = new Member('b', log);
    gate.join(b);
    expect(log, 'nobody suspended while attaching').to.deep.equal([]);
    attached();
    await attaching;
    expect(await call).to.equal('ran');
    expect(log).to.have.members(['a suspend', 'a idle', 'b suspend', 'b idle', 'a unsuspend', 'b unsuspend']);
  });
});
