import { expect } from 'chai';
import type { Logger } from '../../src/logging/logger.js';
import type { IsolationGate } from '../../src/runner/intake/isolation-gate.js';
import type { ProbeQuestion, QueueProbe, SharedChannel } from '../../src/runner/channels/shared-channel.js';
import {
  MISSING_SUSPECT_CHECK_MAX_MS,
  missingSuspectCheckMs,
  SUSPECT_GATHER_MS,
  SuspectWatch,
  type SuspectWatchOptions,
} from '../../src/runner/intake/suspect-watch.js';

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;
const CHECK_MS = 60_000;

/** A probe that records each question and answers from `counts` (a queue not there: missing). */
class RecordingProbe {
  readonly asked: Array<{ queue: string; mayBeMissing: boolean }> = [];
  readonly counts = new Map<string, number>();
  messageCount(queue: string, question: ProbeQuestion = {}): Promise<number | undefined> {
    this.asked.push({ queue, mayBeMissing: question.mayBeMissing === true });
    return Promise.resolve(this.counts.get(queue));
  }
}

/** Waits for `condition`, at most about two seconds. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(condition(), what).to.equal(true);
}

/** A pooled watch over `suspect.acme` on a shared channel that is open, its probe recording. */
function pooledWatch(over: Partial<SuspectWatchOptions> = {}): { watch: SuspectWatch; probe: RecordingProbe } {
  const probe = new RecordingProbe();
  const link = { channel: { get: () => Promise.resolve(false) }, source: { flush: () => undefined, closed: false } };
  const channel = {
    current: link,
    join: (member: { linkOpened(link: unknown): void }) => member.linkOpened(link),
    leave: () => undefined,
  };
  const gate = { isolating: false, runAlone: (fn: () => Promise<void>) => fn() };
  const watch = new SuspectWatch({
    queue: 'suspect.acme',
    declare: () => Promise.resolve(),
    log: silent,
    gate: gate as unknown as IsolationGate,
    running: () => true,
    runAlone: () => Promise.resolve(),
    onFatal: () => undefined,
    lost: () => undefined,
    arrived: () => undefined,
    checkMs: CHECK_MS,
    shared: { channel: channel as unknown as SharedChannel, probe: probe as unknown as QueueProbe },
    ...over,
  });
  return { watch, probe };
}

describe('SuspectWatch (pooled, its queue declared on first use)', () => {
  it('the wait after a look that found the queue missing doubles from checkMs, bounded by MISSING_SUSPECT_CHECK_MAX_MS', () => {
    expect([1, 2, 3].map((misses) => missingSuspectCheckMs(5000, misses))).to.deep.equal([10_000, 20_000, 40_000]);
    expect(missingSuspectCheckMs(5000, 50)).to.equal(MISSING_SUSPECT_CHECK_MAX_MS);
    // A process so large that its plain interval is longer: that interval.
    expect(missingSuspectCheckMs(2 * MISSING_SUSPECT_CHECK_MAX_MS, 1)).to.equal(2 * MISSING_SUSPECT_CHECK_MAX_MS);
  });

  it('asks about a queue not known to exist as mayBeMissing; found missing, it backs off, and only its own moved() looks sooner', async () => {
    const { watch, probe } = pooledWatch({ mayBeMissing: true });
    const before = Date.now();
    await watch.attach({} as never);
    await until(() => probe.asked.length === 1 && watch.nextLook !== undefined, 'looked once at start');
    expect(probe.asked).to.deep.equal([{ queue: 'suspect.acme', mayBeMissing: true }]);
    // Missing: the next look is two intervals away, not one.
    const backedOff = watch.nextLook as number;
    expect(backedOff).to.be.at.least(before + missingSuspectCheckMs(CHECK_MS, 1));
    // A new shared channel generation, a resume, an isolation window: none looks before the wait is over.
    watch.linkOpened({} as never);
    watch.mayWait(0);
    await watch.attach({} as never);
    expect(watch.nextLook).to.equal(backedOff);
    expect(probe.asked).to.have.length(1);

    // Its runner declared the queue and moved a job there: a look a moment later, about a queue that exists.
    probe.counts.set('suspect.acme', 0);
    const moved = Date.now();
    watch.moved();
    expect(watch.nextLook).to.be.at.most(moved + SUSPECT_GATHER_MS + 50);
    await until(() => probe.asked.length === 2 && watch.nextLook !== undefined, 'looked after moved()');
    expect(probe.asked[1]).to.deep.equal({ queue: 'suspect.acme', mayBeMissing: false });
    // Found: back to the plain interval.
    expect(watch.nextLook).to.be.at.most(Date.now() + CHECK_MS);
    await watch.close();
  });

  it('a watch of a queue declared at start asks as before: not as mayBeMissing, every checkMs even when it is missing', async () => {
    const { watch, probe } = pooledWatch();
    await watch.attach({} as never);
    await until(() => probe.asked.length === 1 && watch.nextLook !== undefined, 'looked once at start');
    expect(probe.asked).to.deep.equal([{ queue: 'suspect.acme', mayBeMissing: false }]);
    expect(watch.nextLook).to.be.at.most(Date.now() + CHECK_MS);
    await watch.close();
  });
});
