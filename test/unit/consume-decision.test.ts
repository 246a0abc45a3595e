import { expect } from 'chai';
import { ConsumeDecision, type ChannelHealth } from '../../src/runner/intake/consume-decision.js';
import { Lifecycle, type RunnerState } from '../../src/runner/intake/lifecycle.js';

const STATES: readonly RunnerState[] = ['starting', 'running', 'paused', 'quiet', 'stopping', 'stopped'];

/** A decision over a lifecycle held in `state`, suspended `suspensions` times. */
function decisionAt(state: RunnerState, suspensions: number): ConsumeDecision {
  const decision = new ConsumeDecision({ state });
  for (let i = 0; i < suspensions; i++) decision.suspend();
  return decision;
}

describe('ConsumeDecision', () => {
  describe('every combination of lifecycle state and suspensions', () => {
    for (const state of STATES) {
      for (const suspensions of [0, 1, 2]) {
        const running = state === 'running';
        it(`${state}, suspended ${suspensions} time(s): consume ${running && suspensions === 0}, suspects ${running}`, () => {
          const decision = decisionAt(state, suspensions);
          expect(decision.consume, 'consume').to.equal(running && suspensions === 0);
          // The gate suspends the runner so that a suspect runs alone: suspects still go on.
          expect(decision.takeSuspects, 'takeSuspects').to.equal(running);
          expect(decision.suspended, 'suspended').to.equal(suspensions > 0);
        });

        for (const open of [true, false]) {
          for (const consuming of [true, false]) {
            // Never while starting; always when not meant to consume; running: every channel up,
            // and both consumers on unless a suspect runs alone.
            const expected = state === 'starting' ? false : !running ? true : open && (suspensions > 0 || consuming);
            it(`${state}, suspended ${suspensions}, channels ${open ? 'up' : 'down'}, consumers ${consuming ? 'on' : 'off'}: healthy ${expected}`, () => {
              const decision = decisionAt(state, suspensions);
              let asked = 0;
              const channels = (): ChannelHealth => {
                asked++;
                return { open, consuming };
              };
              expect(decision.healthy(channels)).to.equal(expected);
              // The channels matter only while running.
              expect(asked).to.equal(running ? 1 : 0);
            });
          }
        }
      }
    }
  });

  it('unsuspend says to consume again only when the last suspension ends while running', () => {
    const lifecycle = { state: 'running' as RunnerState };
    const decision = new ConsumeDecision(lifecycle);
    decision.suspend();
    decision.suspend();
    expect(decision.unsuspend(), 'one suspension left').to.equal(false);
    expect(decision.consume).to.equal(false);
    expect(decision.unsuspend(), 'the last one').to.equal(true);
    expect(decision.consume).to.equal(true);

    lifecycle.state = 'paused';
    decision.suspend();
    expect(decision.unsuspend(), 'paused meanwhile').to.equal(false);
    expect(decision.suspended).to.equal(false);
    lifecycle.state = 'running';
    expect(decision.consume, 'resumed').to.equal(true);
  });

  it('follows a real Lifecycle through pause, resume, quiet and stop', async () => {
    const lifecycle = new Lifecycle();
    const decision = new ConsumeDecision(lifecycle);
    const seen: Array<[RunnerState, boolean]> = [];
    const note = (): number => seen.push([lifecycle.state, decision.consume]);
    note();
    for (const state of ['running', 'paused', 'running', 'quiet', 'running'] as const) {
      lifecycle.to(state);
      note();
    }
    await lifecycle.stop(() => {
      note();
      return Promise.resolve(true);
    });
    note();
    expect(seen).to.deep.equal([
      ['starting', false],
      ['running', true],
      ['paused', false],
      ['running', true],
      ['quiet', false],
      // quiet is for good: a resume does not take it back.
      ['quiet', false],
      ['stopping', false],
      ['stopped', false],
    ]);
  });
});
