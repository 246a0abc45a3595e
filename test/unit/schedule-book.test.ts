import { expect } from 'chai';
import { compileConfig } from '../../src/index.js';
import { compileSchedule } from '../../src/config/compile-schedule.js';
import { configSyncRecords } from '../../src/schedule/config-sync.js';
import { planAfter, planOccurrence, spreadOffset, type PlanContext } from '../../src/schedule/fire-plan.js';
import { occurrenceId } from '../../src/schedule/occurrence-id.js';
import { ScheduleBook, type BookEntry } from '../../src/schedule/schedule-book.js';
import type { ScheduleRecord } from '../../src/schedule/schedule-records.js';
import type { WebhookSubscription } from '../../src/webhooks/webhook-subscription.js';

const at = (iso: string): number => Date.parse(iso);
let seq = 0;
const stamp = (iso: string): { id: string; at: string } => ({ id: `r${seq++}`, at: iso });

const hourly = compileSchedule('hourly', { cron: '0 * * * *', queue: 'q', type: 'a.b', tenants: '*', spread: 'PT10M' }, 'hourly');

function bookWith(...records: ScheduleRecord[]): ScheduleBook {
  const book = new ScheduleBook();
  for (const record of records) book.apply(record);
  return book;
}

const ctx = (book: ScheduleBook): PlanContext => ({
  zoneOf: (_tenant, schedule) => schedule.timezone,
  joinedAt: (tenant) => book.joined.get(tenant),
  handled: (entry, tenant) => entry.handled.get(tenant ?? ''),
});

describe('schedules: the book and the plan', () => {
  it('folds registrations, fires and skips, and counts jobs enqueued', () => {
    const book = bookWith(
      { ...stamp('2026-03-01T09:30:00Z'), kind: 'put', schedule: hourly, origin: 'api' },
      { ...stamp('2026-03-01T10:00:01Z'), kind: 'fired', key: 'hourly', tenant: 'acme', occurrence: '2026-03-01T10:00:00.000Z', job: 'j1' },
      {
        ...stamp('2026-03-01T10:00:02Z'),
        kind: 'skipped',
        key: 'hourly',
        tenant: 'globex',
        occurrence: '2026-03-01T10:00:00.000Z',
        reason: 'overlap_skip',
      },
    );
    const entry = book.entries.get('hourly') as BookEntry;
    expect(entry.run_count).to.equal(1);
    expect(entry.last_run_at).to.equal('2026-03-01T10:00:01Z');
    expect(entry.handled.get('acme')).to.equal(at('2026-03-01T10:00:00Z'));
    expect(entry.handled.get('globex')).to.equal(at('2026-03-01T10:00:00Z'));
    expect(entry.lastJobs.get('acme')).to.equal('j1');
    expect(entry.recent).to.deep.equal([{ occurrence: '2026-03-01T10:00:00.000Z', fired: 1, skipped: 1, job: 'j1' }]);
    // A snapshot carries all of it: a reader that starts there knows the same.
    const again = bookWith({ ...stamp('2026-03-01T11:00:00Z'), kind: 'snapshot', state: book.snapshot() });
    expect(again.snapshot()).to.deep.equal(book.snapshot());
    // Records about a schedule that is not registered are ignored.
    book.apply({ ...stamp('2026-03-01T12:00:00Z'), kind: 'remove', key: 'hourly' });
    book.apply({ ...stamp('2026-03-01T13:00:01Z'), kind: 'fired', key: 'hourly', occurrence: '2026-03-01T13:00:00.000Z', job: 'j2' });
    expect(book.entries.size).to.equal(0);
  });

  it('catches up once after a pause: the latest missed occurrence, due at once, then the next', () => {
    const book = bookWith(
      { ...stamp('2026-03-01T09:30:00Z'), kind: 'put', schedule: { ...hourly, spread: undefined } as typeof hourly, origin: 'api' },
      { ...stamp('2026-03-01T10:00:01Z'), kind: 'fired', key: 'hourly', tenant: 'acme', occurrence: '2026-03-01T10:00:00.000Z', job: 'j1' },
    );
    const entry = book.entries.get('hourly') as BookEntry;
    const now = at('2026-03-01T14:20:00Z'); // 11:00 to 14:00 missed
    const caughtUp = planOccurrence(entry, 'acme', now, ctx(book));
    expect(caughtUp).to.include({ occurrence: at('2026-03-01T14:00:00Z'), due: at('2026-03-01T14:00:00Z') });
    expect(planAfter(entry, 'acme', caughtUp?.occurrence as number, now, ctx(book))).to.include({ occurrence: at('2026-03-01T15:00:00Z') });
  });

  it('does not catch up what came before the schedule, its enabling or the tenant joining', () => {
    const book = bookWith(
      { ...stamp('2026-03-01T09:30:00Z'), kind: 'put', schedule: { ...hourly, spread: undefined } as typeof hourly, origin: 'api' },
      { ...stamp('2026-03-01T12:30:00Z'), kind: 'joined', tenant: 'initech' },
      { ...stamp('2026-03-01T12:40:00Z'), kind: 'toggle', key: 'hourly', enabled: false },
    );
    const entry = book.entries.get('hourly') as BookEntry;
    // A tenant that joined at 12:30 starts at 13:00, not with a catch-up of 12:00.
    expect(planOccurrence(entry, 'initech', at('2026-03-01T12:45:00Z'), ctx(book))).to.include({ occurrence: at('2026-03-01T13:00:00Z') });
    // A tenant there from the start catches up 12:00 (its first occurrence after the registration).
    expect(planOccurrence(entry, 'acme', at('2026-03-01T12:45:00Z'), ctx(book))).to.include({ occurrence: at('2026-03-01T12:00:00Z') });
    // Enabled again at 15:10: what it missed while disabled is not caught up.
    book.apply({ ...stamp('2026-03-01T15:10:00Z'), kind: 'toggle', key: 'hourly', enabled: true });
    expect(planOccurrence(entry, 'acme', at('2026-03-01T15:20:00Z'), ctx(book))).to.include({ occurrence: at('2026-03-01T16:00:00Z') });
  });

  it('spreads tenants at a fixed offset within the window', () => {
    const offsets = ['acme', 'globex', 'initech'].map((tenant) => spreadOffset('hourly', tenant, 600_000));
    for (const offset of offsets) expect(offset).to.be.within(0, 599_999);
    expect(new Set(offsets).size).to.equal(3);
    expect(spreadOffset('hourly', 'acme', 600_000)).to.equal(offsets[0]);
    const book = bookWith({ ...stamp('2026-03-01T09:30:00Z'), kind: 'put', schedule: hourly, origin: 'api' });
    const plan = planOccurrence(book.entries.get('hourly') as BookEntry, 'globex', at('2026-03-01T09:40:00Z'), ctx(book));
    expect(plan).to.include({ occurrence: at('2026-03-01T10:00:00Z'), due: at('2026-03-01T10:00:00Z') + (offsets[1] as number) });
  });

  it('derives one UUIDv7-shaped id per (schedule, registration, tenant, occurrence)', () => {
    const id = occurrenceId('hourly', '2026-03-01T09:30:00Z', 'acme', at('2026-03-01T10:00:00Z'));
    expect(id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(occurrenceId('hourly', '2026-03-01T09:30:00Z', 'acme', at('2026-03-01T10:00:00Z'))).to.equal(id);
    // Its time is the occurrence's: ids sort as occurrences do.
    expect(parseInt(id.replace(/-/g, '').slice(0, 12), 16)).to.equal(at('2026-03-01T10:00:00Z'));
    for (const other of [
      occurrenceId('hourly', '2026-03-01T09:30:00Z', 'globex', at('2026-03-01T10:00:00Z')),
      occurrenceId('hourly', '2026-03-01T09:30:00Z', 'acme', at('2026-03-01T11:00:00Z')),
      occurrenceId('hourly', '2026-03-02T00:00:00Z', 'acme', at('2026-03-01T10:00:00Z')),
      occurrenceId('other', '2026-03-01T09:30:00Z', 'acme', at('2026-03-01T10:00:00Z')),
    ])
      expect(other).to.not.equal(id);
  });

  it("registers the configuration file's schedules, replaces changed ones and removes the file's gone ones only", () => {
    const config = compileConfig({
      stages: {},
      queues: { q: { scope: 'shared' } },
      schedules: { hourly: { cron: '@hourly', queue: 'q', type: 'a.b' } },
    });
    const book = new ScheduleBook();
    const first = configSyncRecords(config, book);
    expect(first.map((record) => record.kind)).to.deep.equal(['put']);
    for (const record of first) book.apply(record);
    expect(configSyncRecords(config, book)).to.deep.equal([]);
    book.apply({
      ...stamp('2026-03-01T00:00:00Z'),
      kind: 'put',
      schedule: compileSchedule('api', { cron: '@daily', queue: 'q', type: 'a.b' }, 'api'),
      origin: 'api',
    });
    const without = compileConfig({ stages: {}, queues: { q: { scope: 'shared' } } });
    expect(configSyncRecords(without, book).map((record) => (record.kind === 'remove' ? record.key : record.kind))).to.deep.equal([
      'hourly',
    ]);
  });

  it('keeps webhook subscriptions beside the schedules: changed, deleted, in snapshots, cleared by a reset', () => {
    const hook = {
      id: 'sub_1',
      owner: 'acme',
      url: 'https://hooks.acme.example/ojs',
      events: ['job.completed'],
      active: true,
      secret: 'whsec_test',
      created_at: '2026-03-01T09:00:00Z',
      updated_at: '2026-03-01T09:00:00Z',
    };
    const book = bookWith(
      { ...stamp('2026-03-01T09:00:00Z'), kind: 'webhook', subscription: hook },
      { ...stamp('2026-03-01T09:00:01Z'), kind: 'webhook', subscription: { ...hook, id: 'sub_2' } },
      { ...stamp('2026-03-01T09:00:02Z'), kind: 'webhook', subscription: { ...hook, active: false } },
      { ...stamp('2026-03-01T09:00:03Z'), kind: 'unhook', subscription: 'sub_2' },
    );
    expect([...book.webhooks.values()]).to.deep.equal([{ ...hook, active: false }]);
    const again = bookWith({ ...stamp('2026-03-01T10:00:00Z'), kind: 'snapshot', state: book.snapshot() });
    expect([...again.webhooks.values()]).to.deep.equal([{ ...hook, active: false }]);
    again.apply({ ...stamp('2026-03-01T11:00:00Z'), kind: 'clear' });
    expect(again.webhooks.size).to.equal(0);
  });

  it('loses no record another process appends between the leader taking a snapshot and the snapshot landing', () => {
    const hook = (id: string): WebhookSubscription => ({
      id,
      owner: 'acme',
      url: 'https://hooks.acme.example/ojs',
      events: ['job.completed'],
      active: true,
      secret: 'whsec_test',
      created_at: '2026-03-01T09:00:00Z',
      updated_at: '2026-03-01T09:00:00Z',
    });
    const daily = compileSchedule('daily', { cron: '0 3 * * *', queue: 'q', type: 'a.b' }, 'daily');
    const before: ScheduleRecord[] = [
      { ...stamp('2026-03-01T09:00:00Z'), kind: 'put', schedule: hourly, origin: 'api' },
      { ...stamp('2026-03-01T09:00:01Z'), kind: 'webhook', subscription: hook('sub_old') },
    ];
    // The leader takes its snapshot with these folded...
    const leader = bookWith(...before);
    const snapshot = (book: ScheduleBook): ScheduleRecord => ({
      ...stamp('2026-03-01T09:00:05Z'),
      kind: 'snapshot',
      state: book.snapshot(),
      ...(book.lastId === undefined ? {} : { covers: book.lastId }),
    });
    const taken = snapshot(leader);
    // ...while others append these, which land before the snapshot does.
    const between: ScheduleRecord[] = [
      { ...stamp('2026-03-01T09:00:02Z'), kind: 'webhook', subscription: hook('sub_new') },
      { ...stamp('2026-03-01T09:00:03Z'), kind: 'unhook', subscription: 'sub_old' },
      { ...stamp('2026-03-01T09:00:04Z'), kind: 'put', schedule: daily, origin: 'api' },
    ];
    const expectAll = (book: ScheduleBook, what: string): void => {
      expect([...book.webhooks.keys()], what).to.deep.equal(['sub_new']);
      expect([...book.entries.keys()].sort(), what).to.deep.equal(['daily', 'hourly']);
    };
    // A reader of the whole stream, and one that starts past the covered record (the stream trimmed).
    expectAll(bookWith(...before, ...between, taken), 'from the start');
    expectAll(bookWith(...between, taken), 'from past the covered record');
    // The leader folds the same, and its next snapshot, covering the first, carries everything.
    leader.apply(between[0] as ScheduleRecord);
    leader.apply(between[1] as ScheduleRecord);
    leader.apply(between[2] as ScheduleRecord);
    leader.apply(taken);
    expectAll(leader, 'the leader');
    expectAll(bookWith(snapshot(leader)), 'from the next snapshot');
    // A record after the snapshot is folded once, not again at the next snapshot.
    leader.apply({ ...stamp('2026-03-01T09:00:06Z'), kind: 'fired', key: 'hourly', occurrence: '2026-03-01T10:00:00.000Z', job: 'j1' });
    const next = snapshot(leader);
    leader.apply(next);
    expect((leader.entries.get('hourly') as BookEntry).run_count).to.equal(1);
  });

  it('keeps queue pools beside the schedules: redefined, deleted, in snapshots, cleared by a reset', () => {
    const pool = {
      name: 'media',
      strategy: 'weighted' as const,
      queues: ['thumbs', 'videos'],
      weights: { thumbs: 3, videos: 1 },
      created_at: '2026-03-01T09:00:00Z',
      updated_at: '2026-03-01T09:00:00Z',
    };
    const book = bookWith(
      { ...stamp('2026-03-01T09:00:00Z'), kind: 'pool', pool },
      { ...stamp('2026-03-01T09:00:01Z'), kind: 'pool', pool: { ...pool, name: 'other' } },
      { ...stamp('2026-03-01T09:00:02Z'), kind: 'pool', pool: { ...pool, weights: { thumbs: 5, videos: 1 } } },
      { ...stamp('2026-03-01T09:00:03Z'), kind: 'unpool', name: 'other' },
    );
    expect([...book.queuePools.values()]).to.deep.equal([{ ...pool, weights: { thumbs: 5, videos: 1 } }]);
    const again = bookWith({ ...stamp('2026-03-01T10:00:00Z'), kind: 'snapshot', state: book.snapshot() });
    expect([...again.queuePools.values()]).to.deep.equal([{ ...pool, weights: { thumbs: 5, videos: 1 } }]);
    again.apply({ ...stamp('2026-03-01T11:00:00Z'), kind: 'clear' });
    expect(again.queuePools.size).to.equal(0);
  });
});
