import { expect } from 'chai';
import { parseNice, TRACKER_NICE } from '../../src/cli/tracker-priority.js';
import { StagecoachError } from '../../src/errors/errors.js';

describe('stagecoach tracker --nice', () => {
  it('defaults to TRACKER_NICE and takes a whole number from 0 to 19', () => {
    expect(parseNice(undefined)).to.equal(TRACKER_NICE);
    expect(parseNice('0')).to.equal(0);
    expect(parseNice('19')).to.equal(19);
  });

  it('refuses anything else, naming the flag and the value', () => {
    for (const bad of ['20', '-1', '2.5', 'low', '']) {
      expect(() => parseNice(bad), bad)
        .to.throw(StagecoachError, `--nice "${bad}" is not a whole number from 0 to 19`)
        .with.property('code', 'INVALID_REQUEST');
    }
  });
});
