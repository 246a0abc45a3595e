import { expect } from 'chai';
import type { ChannelModel } from 'amqplib';
import { BrokerFlags } from '../../src/flags/broker-flags.js';
import { FLAG_KINDS, flagName, flagsIn, isFlagName, parseFlagName, type Flag } from '../../src/flags/flag.js';
import { ListedFlags } from '../../src/flags/listed-flags.js';
import { BrokerNames, parseBrokerName } from '../../src/topology/names.js';

/** One flag of every kind, with the name existing brokers hold for it under `ojs`. */
const EXAMPLES: Array<[Flag, string]> = [
  [{ kind: 'queue-paused', queue: 'scan-specs' }, 'ojs.state.paused.scan-specs'],
  [{ kind: 'queue-paused', queue: 'conversions', tenant: 'acme' }, 'ojs.state.paused.conversions.acme'],
  [{ kind: 'queue-paused', queue: 'conversions', tenant: 'acme', variant: 'pdf' }, 'ojs.state.paused.conversions.acme.pdf'],
  [{ kind: 'queue-draining', queue: 'scan-specs' }, 'ojs.state.draining.scan-specs'],
  [{ kind: 'queue-draining', queue: 'conversions', tenant: 'acme' }, 'ojs.state.draining.conversions.acme'],
  [{ kind: 'batch-cancelled', batch: 'scan-1' }, 'ojs.batch-cancelled.scan-1'],
  [{ kind: 'batch-paused', batch: 'nightly.2026-11-26' }, 'ojs.batch-paused.nightly.2026-11-26'],
  [{ kind: 'tenant-paused', tenant: 'acme' }, 'ojs.tenant-paused.acme'],
  [{ kind: 'read-lock' }, 'ojs.read-lock'],
  [{ kind: 'scheduler-leader' }, 'ojs.scheduler-leader'],
  [{ kind: 'webhook-deliverer' }, 'ojs.webhook-deliverer'],
  [{ kind: 'tenant-provisioned', tenant: 'acme' }, 'ojs.tenant.acme'],
];

/** A connection whose channels keep `exchanges` and `queues` as a broker would, recording every call. */
function fakeBroker(exchanges = new Set<string>(), queues = new Map<string, 'ours' | 'locked' | 'refused'>()) {
  const calls: string[] = [];
  let opened = 0;
  const refuse = (code: number): Promise<never> => Promise.reject(Object.assign(new Error(`refused ${code}`), { code }));
  const connection = {
    createChannel: () => {
      opened++;
      let open = true;
      const call = <T>(what: string, answer: () => Promise<T>): Promise<T> => {
        if (!open) return Promise.reject(new Error('channel closed'));
        calls.push(what);
        return answer().catch((err: unknown) => {
          open = false; // the broker closes a channel it refuses something on
          throw err;
        });
      };
      return Promise.resolve({
        on: () => undefined,
        close: () => Promise.resolve(),
        checkExchange: (name: string) => call(`check ${name}`, () => (exchanges.has(name) ? Promise.resolve({}) : refuse(404))),
        assertExchange: (name: string, type: string, options: { durable: boolean }) =>
          call(`declare ${name} ${type} durable=${options.durable}`, () => {
            exchanges.add(name);
            return Promise.resolve({ exchange: name });
          }),
        deleteExchange: (name: string) =>
          call(`delete ${name}`, () => {
            exchanges.delete(name);
            return Promise.resolve({});
          }),
        checkQueue: (name: string) =>
          call(`check queue ${name}`, () => {
            const held = queues.get(name);
            return held === undefined ? refuse(404) : held === 'locked' ? refuse(405) : Promise.resolve({ queue: name });
          }),
        assertQueue: (name: string, options: Record<string, unknown>) =>
          call(`declare queue ${name} ${JSON.stringify(options)}`, () => {
            const held = queues.get(name);
            if (held === 'locked') return refuse(405);
            if (held === 'refused') return refuse(403);
            queues.set(name, 'ours');
            return Promise.resolve({ queue: name });
          }),
      });
    },
  } as unknown as ChannelModel;
  return { connection, calls, exchanges, channels: () => opened };
}

describe('broker flags', () => {
  describe('names', () => {
    it('are the names existing brokers hold, and read back into the same flag', () => {
      for (const [flag, name] of EXAMPLES) {
        expect(flagName('ojs', flag), flag.kind).to.equal(name);
        if (flag.kind === 'tenant-provisioned') continue;
        expect(parseFlagName('ojs', name), name).to.deep.equal(flag);
      }
      expect(new Set(EXAMPLES.map(([flag]) => flag.kind))).to.deep.equal(new Set(FLAG_KINDS));
    });

    it('are the ones BrokerNames hands out', () => {
      const names = new BrokerNames('ojs');
      expect(names.stateMarker('paused', 'conversions', 'acme', 'pdf')).to.equal('ojs.state.paused.conversions.acme.pdf');
      expect(names.stateMarker('draining', 'conversions', 'acme', 'pdf'), 'a drain has no variant').to.equal(
        'ojs.state.draining.conversions.acme',
      );
      expect(names.stateMarker('paused', 'scan-specs')).to.equal('ojs.state.paused.scan-specs');
      expect(names.batchMarker('cancelled', 'b1')).to.equal('ojs.batch-cancelled.b1');
      expect(names.batchMarker('paused', 'b1')).to.equal('ojs.batch-paused.b1');
      expect(names.tenantPauseMarker('acme')).to.equal('ojs.tenant-paused.acme');
      expect(names.readLock).to.equal('ojs.read-lock');
      expect(names.tenantExchange('acme')).to.equal('ojs.tenant.acme');
    });

    it('reads queue flags as parseBrokerName does (removal finds them by their queue and tenant)', () => {
      for (const [flag, name] of EXAMPLES) {
        if (flag.kind !== 'queue-paused' && flag.kind !== 'queue-draining') continue;
        const { kind: _kind, ...target } = flag;
        void _kind;
        expect(parseBrokerName('ojs', name)).to.deep.equal({ kind: 'state', ...target });
      }
    });
  });

  describe('isFlagName, the predicate plan leaves state alone by', () => {
    it('claims markers and the read lock', () => {
      for (const [flag, name] of EXAMPLES) expect(isFlagName('ojs', name), name).to.equal(flag.kind !== 'tenant-provisioned');
      expect(isFlagName('ojs', 'ojs.batch-paused.'), 'anything under a directive head, as before').to.equal(true);
    });

    it('leaves topology, other prefixes and malformed state names to plan', () => {
      for (const name of [
        'ojs.tenant.acme',
        'ojs.queue.conversions.acme',
        'ojs.state',
        'ojs.state.paused',
        'ojs.state.paused.',
        'ojs.state.resting.conversions',
        'ojs.state.draining.conversions.acme.pdf',
        'ojs.state.paused.conversions.acme.pdf.extra',
        'ojs.read-lock.2',
        'other.read-lock',
        'other.state.paused.conversions',
        'ojsx.batch-paused.b1',
      ]) {
        expect(isFlagName('ojs', name), name).to.equal(false);
      }
    });

    it('lists the flags of some kinds among names', () => {
      const names = ['ojs.root', 'ojs.state.paused.a', 'ojs.batch-paused.b', 'ojs.state.draining.c.acme', 'other.state.paused.d'];
      expect(flagsIn('ojs', names, ['queue-paused', 'queue-draining'])).to.deep.equal([
        { kind: 'queue-paused', queue: 'a' },
        { kind: 'queue-draining', queue: 'c', tenant: 'acme' },
      ]);
      expect(flagsIn('ojs', names, ['batch-paused'])).to.deep.equal([{ kind: 'batch-paused', batch: 'b' }]);
    });
  });

  describe('BrokerFlags on a channel', () => {
    it('sets a marker as a fanout exchange of the topology durability, and clears it', async () => {
      const broker = fakeBroker();
      const flags = new BrokerFlags(broker.connection, { prefix: 'p', durable: false });
      await flags.set({ kind: 'batch-paused', batch: 'b1' });
      expect(await flags.isSet({ kind: 'batch-paused', batch: 'b1' })).to.equal(true);
      await flags.clear({ kind: 'batch-paused', batch: 'b1' });
      expect(await flags.isSet({ kind: 'batch-paused', batch: 'b1' })).to.equal(false);
      expect(broker.calls).to.deep.equal([
        'declare p.batch-paused.b1 fanout durable=false',
        'check p.batch-paused.b1',
        'delete p.batch-paused.b1',
        'check p.batch-paused.b1',
      ]);
      expect(broker.channels(), 'one channel until the 404').to.equal(1);
      await flags.set({ kind: 'queue-paused', queue: 'q' });
      expect(broker.channels(), 'a refusal costs the channel').to.equal(2);
      expect(new BrokerFlags(broker.connection, { prefix: 'p' }).name({ kind: 'read-lock' })).to.equal('p.read-lock');
    });

    it('markers are durable unless the scope says otherwise', async () => {
      const broker = fakeBroker();
      await new BrokerFlags(broker.connection, { prefix: 'p' }).set({ kind: 'tenant-paused', tenant: 'acme' });
      expect(broker.calls).to.deep.equal(['declare p.tenant-paused.acme fanout durable=true']);
    });

    it('reads the tenant-provisioned flag from the tenant exchange', async () => {
      const broker = fakeBroker(new Set(['p.tenant.acme']));
      const flags = new BrokerFlags(broker.connection, { prefix: 'p' });
      expect(await flags.isSet({ kind: 'tenant-provisioned', tenant: 'acme' })).to.equal(true);
      expect(await flags.isSet({ kind: 'tenant-provisioned', tenant: 'globex' })).to.equal(false);
    });

    it('answers false only for a 404: any other refusal is thrown', async () => {
      const connection = {
        createChannel: () =>
          Promise.resolve({
            on: () => undefined,
            close: () => Promise.resolve(),
            checkExchange: () => Promise.reject(Object.assign(new Error('ACCESS_REFUSED'), { code: 403 })),
          }),
      } as unknown as ChannelModel;
      const flags = new BrokerFlags(connection, { prefix: 'p' });
      const err = await flags.isSet({ kind: 'tenant-paused', tenant: 'acme' }).catch((e: unknown) => e);
      expect((err as Error).message).to.equal('ACCESS_REFUSED');
    });

    it('asks one question at a time, so that a 404 never closes the channel under another question', async () => {
      const broker = fakeBroker(new Set(['p.batch-paused.b2']));
      const flags = new BrokerFlags(broker.connection, { prefix: 'p' });
      const answers = await Promise.all([
        flags.isSet({ kind: 'batch-paused', batch: 'b1' }),
        flags.isSet({ kind: 'batch-paused', batch: 'b2' }),
        flags.isSet({ kind: 'batch-cancelled', batch: 'b1' }),
      ]);
      expect(answers).to.deep.equal([false, true, false]);
      expect(await flags.present(['p.batch-paused.b1', 'p.batch-paused.b2'])).to.deep.equal(new Set(['p.batch-paused.b2']));
    });

    it('holds the read lock as an exclusive queue, and tells a lock taken by another connection from one it may not declare', async () => {
      const queues = new Map<string, 'ours' | 'locked' | 'refused'>();
      const broker = fakeBroker(new Set(), queues);
      const flags = new BrokerFlags(broker.connection, { prefix: 'p' });
      expect(await flags.isSet({ kind: 'read-lock' })).to.equal(false);
      expect(await flags.hold({ kind: 'read-lock' })).to.equal('held');
      expect(broker.calls).to.include('declare queue p.read-lock {"exclusive":true,"durable":false,"autoDelete":false}');
      queues.set('p.read-lock', 'locked');
      expect(await flags.isSet({ kind: 'read-lock' }), 'held by another connection').to.equal(true);
      expect(await flags.hold({ kind: 'read-lock' })).to.equal('taken');
      queues.set('p.read-lock', 'refused');
      expect(await flags.hold({ kind: 'read-lock' })).to.equal('refused');
    });
  });

  describe('ListedFlags', () => {
    it('answers from one listing of the exchanges, whatever the number of names', async () => {
      let listings = 0;
      const api = {
        listExchangeNames: () => {
          listings++;
          return Promise.resolve(['p.root', 'p.state.draining.q.acme', 'p.state.paused.q.acme.pdf', 'p.tenant-paused.acme']);
        },
      };
      const listed = new ListedFlags(api, '/');
      expect(await listed.present([])).to.deep.equal(new Set());
      expect(listings, 'nothing asked, nothing listed').to.equal(0);
      expect(await listed.present(['p.state.draining.q.acme', 'p.state.draining.q.globex'])).to.deep.equal(
        new Set(['p.state.draining.q.acme']),
      );
      expect(await listed.list('p', ['queue-paused', 'tenant-paused'])).to.deep.equal([
        { kind: 'queue-paused', queue: 'q', tenant: 'acme', variant: 'pdf' },
        { kind: 'tenant-paused', tenant: 'acme' },
      ]);
      expect(listings).to.equal(2);
    });
  });
});
