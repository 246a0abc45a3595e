import { expect } from 'chai';
import { compileConfig } from '../../src/index.js';

const base = { stages: {}, queues: { 'scan-specs': { scope: 'shared' }, conversions: { scope: 'tenant' } } };

describe('schedules in the configuration file', () => {
  it('compiles a schedule with its defaults, and tenants with their own time zone', () => {
    const config = compileConfig({
      ...base,
      tenants: ['acme', { name: 'globex', timezone: 'America/New_York' }],
      schedules: {
        'nightly-scan': {
          cron: '0 2 * * *',
          timezone: 'Europe/Copenhagen',
          queue: 'conversions',
          type: 'scan.start',
          tenants: '*',
          spread: 'PT30M',
        },
        hourly: { cron: '@hourly', queue: 'scan-specs', type: 'scan.tick' },
      },
    });
    expect(config.schedules.get('nightly-scan')).to.deep.equal({
      name: 'nightly-scan',
      cron: '0 2 * * *',
      timezone: 'Europe/Copenhagen',
      queue: 'conversions',
      type: 'scan.start',
      args: [],
      tenants: '*',
      spread: 'PT30M',
      overlap_policy: 'skip',
      batch: false,
      enabled: true,
    });
    expect(config.schedules.get('hourly')?.timezone).to.equal('UTC');
    expect([...config.tenantZones]).to.deep.equal([['globex', 'America/New_York']]);
  });

  it('refuses a bad schedule at start-up, naming the key and why', () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ x: { cron: '61 * * * *', queue: 'scan-specs', type: 'a.b' } }, /schedules\.x\.cron: .*minute field: 61 is out of range/],
      [{ x: { cron: '@daily', timezone: 'EST', queue: 'scan-specs', type: 'a.b' } }, /schedules\.x\.timezone: .*"EST"/],
      [{ x: { cron: '@daily', queue: 'conversions', type: 'a.b' } }, /schedules\.x\.tenants: queue "conversions" is tenant-scoped/],
      [{ x: { cron: '@daily', queue: 'scan-specs', type: 'a.b', spread: 'PT5M' } }, /schedules\.x\.spread: .*give "tenants"/],
      [{ x: { cron: '@daily', queue: 'scan-specs', type: 'a.b', tenants: '*', spread: 'P2D' } }, /schedules\.x\.spread: .*at most a day/],
      [{ x: { cron: '@daily', queue: 'scan-specs', type: 'a.b', overlap_policy: 'cancel' } }, /overlap_policy/],
      [{ 'Bad Name': { cron: '@daily', queue: 'scan-specs', type: 'a.b' } }, /schedules/],
    ];
    for (const [schedules, reason] of cases) {
      expect(() => compileConfig({ ...base, schedules }), JSON.stringify(schedules))
        .to.throw(reason)
        .with.property('code', 'INVALID_CONFIG');
    }
    expect(() => compileConfig({ ...base, tenants: [{ name: 'acme', timezone: '+01:00' }] })).to.throw(/tenants\.0\.timezone/);
  });
});
