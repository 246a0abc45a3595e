import { expect } from 'chai';
import { Lifecycle, type RunnerState } from '../../src/runner/intake/lifecycle.js';

/** A Lifecycle whose changes are recorded. */
function recorded(): { lifecycle: Lifecycle; changes: RunnerState[] } {
  const changes: RunnerState[] = [];
  return { lifecycle: new Lifecycle((state) => changes.push(state)), changes };
}

/** A shutdown that finishes when the test says so, counting its runs. */
function controlledShutdown(): {
  shutdown: () => Promise<boolean>;
  runs: () => number;
  finish: (drained: boolean) => void;
  fail: (err: Error) => void;
} {
  let runs = 0;
  let finish: (drained: boolean) => void = () => undefined;
  let fail: (err: Error) => void = () => undefined;
  const shutdown = (): Promise<boolean> => {
    runs++;
    return new Promise<boolean>((resolve, reject) => {
      finish = resolve;
      fail = reject;
    });
  };
  return { shutdown, runs: () => runs, finish: (drained) => finish(drained), fail: (err) => fail(err) };
}

describe('Lifecycle', () => {
  it('starts in `starting`, not stopping', () => {
    const { lifecycle, changes } = recorded();
    expect(lifecycle.state).to.equal('starting');
    expect(lifecycle.stopping).to.equal(false);
    expect(changes).to.deep.equal([]);
  });

  it('allows the transitions of the diagram and reports each one to onChange', () => {
    const { lifecycle, changes } = recorded();
    expect(lifecycle.to('running')).to.equal(true);
    expect(lifecycle.to('paused')).to.equal(true);
    expect(lifecycle.to('running')).to.equal(true);
    expect(lifecycle.to('paused')).to.equal(true);
    expect(lifecycle.to('quiet')).to.equal(true);
    expect(lifecycle.to('stopping')).to.equal(true);
    expect(lifecycle.to('stopped')).to.equal(true);
    expect(lifecycle.state).to.equal('stopped');
    expect(changes).to.deep.equal(['running', 'paused', 'running', 'paused', 'quiet', 'stopping', 'stopped']);
  });

  it('allows running -> quiet, and starting -> stopping', () => {
    const quiet = recorded();
    expect(quiet.lifecycle.to('running')).to.equal(true);
    expect(quiet.lifecycle.to('quiet')).to.equal(true);
    const early = recorded();
    expect(early.lifecycle.to('stopping')).to.equal(true);
    expect(early.changes).to.deep.equal(['stopping']);
  });

  it('refuses the transitions the diagram does not allow, without changing state or calling onChange', () => {
    const refused: Array<[RunnerState[], RunnerState]> = [
      [[], 'paused'],
      [[], 'quiet'],
      [[], 'stopped'],
      [[], 'starting'],
      [['running'], 'running'],
      [['running'], 'starting'],
      [['running'], 'stopped'],
      [['running', 'paused'], 'paused'],
      [['running', 'paused'], 'stopped'],
      // quiet is for good: no resume, no pause.
      [['running', 'quiet'], 'running'],
      [['running', 'quiet'], 'paused'],
      // A resume racing a stop never restarts the runner.
      [['running', 'stopping'], 'running'],
      [['running', 'stopping'], 'paused'],
      [['running', 'stopping'], 'quiet'],
      [['running', 'stopping'], 'stopping'],
      [['running', 'stopping', 'stopped'], 'running'],
      [['running', 'stopping', 'stopped'], 'stopping'],
      [['running', 'stopping', 'stopped'], 'stopped'],
    ];
    for (const [path, target] of refused) {
      const { lifecycle, changes } = recorded();
      for (const step of path) expect(lifecycle.to(step), `${path.join(' -> ')}`).to.equal(true);
      const before = lifecycle.state;
      expect(lifecycle.to(target), `${[...path, target].join(' -> ')} must be refused`).to.equal(false);
      expect(lifecycle.state).to.equal(before);
      expect(changes).to.deep.equal(path);
    }
  });

  it('stop() enters stopping at once, runs the shutdown, then enters stopped, reporting both changes', async () => {
    const { lifecycle, changes } = recorded();
    lifecycle.to('running');
    const shutdown = controlledShutdown();
    const stopped = lifecycle.stop(shutdown.shutdown);
    expect(lifecycle.state).to.equal('stopping');
    expect(lifecycle.stopping).to.equal(true);
    expect(shutdown.runs()).to.equal(1);
    shutdown.finish(true);
    expect(await stopped).to.equal(true);
    expect(lifecycle.state).to.equal('stopped');
    expect(lifecycle.stopping).to.equal(true);
    expect(changes).to.deep.equal(['running', 'stopping', 'stopped']);
  });

  it('stop() runs the shutdown once: every caller gets the same promise and the same result', async () => {
    const { lifecycle, changes } = recorded();
    lifecycle.to('running');
    const shutdown = controlledShutdown();
    const other = controlledShutdown();
    const first = lifecycle.stop(shutdown.shutdown);
    const second = lifecycle.stop(other.shutdown);
    expect(second).to.equal(first);
    expect(other.runs(), 'the later caller shutdown is never run').to.equal(0);
    // The first shutdown has not finished: the second caller must not see a drain yet.
    let secondDone = false;
    void second.then(() => (secondDone = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(secondDone).to.equal(false);
    shutdown.finish(false);
    expect(await first).to.equal(false);
    expect(await second).to.equal(false);
    // A call after it finished gets the stored result as well.
    const third = lifecycle.stop(other.shutdown);
    expect(third).to.equal(first);
    expect(await third).to.equal(false);
    expect(shutdown.runs()).to.equal(1);
    expect(other.runs()).to.equal(0);
    expect(changes).to.deep.equal(['running', 'stopping', 'stopped']);
  });

  it('stop() called again from onChange while entering stopping gets the same promise, and the shutdown runs once', async () => {
    const shutdown = controlledShutdown();
    let reentrant: Promise<boolean> | undefined;
    const changes: RunnerState[] = [];
    const lifecycle: Lifecycle = new Lifecycle((state) => {
      changes.push(state);
      // A 'state' listener that stops the runner as soon as it sees it stopping.
      if (state === 'stopping') reentrant = lifecycle.stop(shutdown.shutdown);
    });
    lifecycle.to('running');
    const first = lifecycle.stop(shutdown.shutdown);
    expect(shutdown.runs()).to.equal(1);
    expect(reentrant).to.equal(first);
    shutdown.finish(true);
    expect(await first).to.equal(true);
    expect(changes).to.deep.equal(['running', 'stopping', 'stopped']);
  });

  it('stop() from starting or paused or quiet goes the same way', async () => {
    for (const path of [[], ['running', 'paused'], ['running', 'quiet']] as RunnerState[][]) {
      const { lifecycle, changes } = recorded();
      for (const step of path) lifecycle.to(step);
      expect(await lifecycle.stop(() => Promise.resolve(true))).to.equal(true);
      expect(lifecycle.state).to.equal('stopped');
      expect(changes).to.deep.equal([...path, 'stopping', 'stopped']);
    }
  });

  it('a failing shutdown still ends in stopped, and every caller gets its error', async () => {
    const { lifecycle, changes } = recorded();
    lifecycle.to('running');
    const shutdown = controlledShutdown();
    const first = lifecycle.stop(shutdown.shutdown);
    const second = lifecycle.stop(shutdown.shutdown);
    const boom = new Error('close failed');
    shutdown.fail(boom);
    for (const stopped of [first, second]) {
      const err = await stopped.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.equal(boom);
    }
    expect(shutdown.runs()).to.equal(1);
    expect(lifecycle.state).to.equal('stopped');
    expect(changes).to.deep.equal(['running', 'stopping', 'stopped']);
  });

  it('no transition out of stopping while the shutdown runs', async () => {
    const { lifecycle, changes } = recorded();
    lifecycle.to('running');
    const shutdown = controlledShutdown();
    const stopped = lifecycle.stop(shutdown.shutdown);
    expect(lifecycle.to('running')).to.equal(false);
    expect(lifecycle.to('paused')).to.equal(false);
    expect(lifecycle.state).to.equal('stopping');
    shutdown.finish(true);
    await stopped;
    expect(changes).to.deep.equal(['running', 'stopping', 'stopped']);
  });
});
