import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { NonRetryableError } from '../../src/index.js';
import { StageHarness } from '../../src/testing/index.js';
import { Converter } from '../../stages/converter.stage.js';
import { Explorer } from '../../stages/explorer.stage.js';
import { Exporter, type ResultLine } from '../../stages/exporter.stage.js';
import { Matcher } from '../../stages/matcher.stage.js';
import { Reporter } from '../../stages/reporter.stage.js';
import { isValidCpr } from '../../stages/lib/cpr.js';
import { csvText, htmlText, jsonStrings } from '../../stages/lib/extract-text.js';
import { findSensitive } from '../../stages/lib/find-sensitive.js';
import { passesLuhn } from '../../stages/lib/luhn.js';
import { BUNDLED_SAMPLES_DIR } from '../../stages/lib/samples-dir.js';

/** The error a promise rejects with; fails the test if it resolves. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection, but it resolved');
}

describe('example stages', () => {
  let tmp: string;
  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'stagecoach-stages-'));
  });
  after(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  describe('matcher', () => {
    const findings = async (text: string) => {
      const harness = await StageHarness.create(Matcher, { tenant: 'acme' });
      const { emitted } = await harness.run({ type: 'doc.text', args: ['doc.txt', text], meta: { scan_id: 's1', scan_total: 3 } });
      expect(emitted).to.have.length(1);
      return emitted[0]?.job.args[1];
    };

    it('reports Luhn-valid card numbers masked but for the last four digits, and ignores Luhn-invalid ones', async () => {
      expect(await findings('paid 4111 1111 1111 1111, ref 4111 1111 1111 1112, 5555-5555-5555-4444 and 378282246310005')).to.deep.equal([
        { kind: 'card', value: '**** **** **** 1111' },
        { kind: 'card', value: '****-****-****-4444' },
        { kind: 'card', value: '***********0005' },
      ]);
      expect(passesLuhn('4111111111111111')).to.equal(true);
      expect(passesLuhn('4111111111111112')).to.equal(false);
    });

    it('does not cut a card-sized number out of a longer digit run', async () => {
      expect(await findings('account 4111 1111 1111 1111 22 and 44111111111111111')).to.deep.equal([]);
    });

    it('reports CPR numbers only when their date exists', async () => {
      expect(await findings('010190-1234 1502851234 290296-4321 320190-1234 011390-1234 290295-1234 300298-1234')).to.deep.equal([
        { kind: 'national_id', value: '010190-1234' },
        { kind: 'national_id', value: '1502851234' },
        { kind: 'national_id', value: '290296-4321' },
      ]);
      // 29 February 2000 exists (serial 4xxx with year <= 36 is the 2000s); 1900 was no leap year.
      expect(isValidCpr('290200-4000')).to.equal(true);
      expect(isValidCpr('290200-1000')).to.equal(false);
    });

    it('reports e-mail addresses, not things that only contain an @', async () => {
      expect(await findings('Mail alice.jensen@acme.example or <bob+x@mail.globex.example>. Not: foo@ or @bar.dk or a@b')).to.deep.equal([
        { kind: 'email', value: 'alice.jensen@acme.example' },
        { kind: 'email', value: 'bob+x@mail.globex.example' },
      ]);
    });

    it('emits one doc.matches per document, even without findings, keeping the scan meta', async () => {
      const harness = await StageHarness.create(Matcher, { tenant: 'acme' });
      const { emitted } = await harness.run({
        type: 'doc.text',
        args: ['notes.md', 'nothing here'],
        meta: { scan_id: 's1', scan_total: 3 },
      });
      expect(emitted).to.have.length(1);
      const [match] = emitted;
      expect(match?.output).to.equal('matches');
      expect(match?.job).to.include({ type: 'doc.matches', tenant: 'acme' });
      expect(match?.job.args).to.deep.equal(['notes.md', []]);
      expect(match?.job.meta).to.include({ scan_id: 's1', scan_total: 3 });
    });

    it('lists findings in document order', () => {
      expect(findSensitive('010190-1234 a@b.dk 4111111111111111').map((f) => f.kind)).to.deep.equal(['national_id', 'email', 'card']);
    });
  });

  describe('converter', () => {
    const convert = async (file: string, mime: string) => {
      const harness = await StageHarness.create(Converter, { tenant: 'acme' });
      const { emitted } = await harness.run({
        type: 'doc.convert',
        args: [file, path.basename(file)],
        meta: { scan_id: 's1', scan_total: 1 },
        headers: { mime },
      });
      expect(emitted).to.have.length(1);
      expect(emitted[0]?.output).to.equal('representations');
      expect(emitted[0]?.job.type).to.equal('doc.text');
      expect(emitted[0]?.job.meta).to.include({ scan_id: 's1', scan_total: 1 });
      return emitted[0]?.job.args[1] as string;
    };

    it('converts a document sent inline as { base64 }, as the explorer sends it', async () => {
      const harness = await StageHarness.create(Converter, { tenant: 'acme' });
      const base64 = Buffer.from('mail me: a@b.dk').toString('base64');
      const { emitted } = await harness.run({ type: 'doc.convert', args: [{ base64 }, 'note.txt'], headers: { mime: 'text/plain' } });
      expect(emitted[0]?.job.args).to.deep.equal(['note.txt', 'mail me: a@b.dk']);
    });

    it('strips HTML tags, scripts and styles, and decodes entities', async () => {
      const file = path.join(tmp, 'page.html');
      const html =
        '<html><head><style>p{color:red}</style></head><body><p>Tom &amp; Jerry &lt;billing&#64;x.example&gt;</p><script>var a = "hidden@tracker.example";</script><td>1</td><td>2</td></body></html>';
      await writeFile(file, html);
      expect(await convert(file, 'text/html')).to.equal('Tom & Jerry <billing@x.example> 1 2');
      expect(htmlText('a&nbsp;b &#x41; &bogus;')).to.equal('a b A &bogus;');
    });

    it('extracts the text of the bundled PDF with pdf.js', async () => {
      const text = await convert(path.join(BUNDLED_SAMPLES_DIR, 'acme', 'report.pdf'), 'application/pdf');
      expect(text.split('\n')).to.deep.equal([
        'ACME quarterly report (synthetic test data)',
        'Questions: finance@acme.example',
        'Corporate card: 5555-5555-5555-4444',
        'Controller CPR: 311299-1001',
      ]);
    });

    it('turns CSV into tab-separated cells and JSON into its string values', async () => {
      expect(csvText('a,"b, c","say ""hi"""\r\n1,2,3\n')).to.equal('a\tb, c\tsay "hi"\n1\t2\t3');
      expect(jsonStrings({ a: 'x', b: [1, 'y', { c: 'z', d: true }] })).to.deep.equal(['x', 'y', 'z']);
      const file = path.join(tmp, 'data.json');
      await writeFile(file, JSON.stringify({ email: 'a@b.dk', n: 4 }));
      expect(await convert(file, 'application/json')).to.equal('a@b.dk');
    });

    it('dead-letters a type it cannot convert without retrying', async () => {
      const harness = await StageHarness.create(Converter, { tenant: 'acme' });
      // The file does not exist: the type is refused before anything is read.
      const err = await rejection(
        harness.run({ type: 'doc.convert', args: [path.join(tmp, 'missing.zip'), 'missing.zip'], headers: { mime: 'application/zip' } }),
      );
      expect(err).to.be.instanceOf(NonRetryableError);
      expect((err as NonRetryableError).type).to.equal('UnsupportedMime');
    });

    it('dead-letters a corrupt PDF without retrying', async () => {
      const file = path.join(tmp, 'broken.pdf');
      await writeFile(file, 'this is not a PDF');
      const harness = await StageHarness.create(Converter, { tenant: 'acme' });
      const err = await rejection(harness.run({ type: 'doc.convert', args: [file, 'broken.pdf'], headers: { mime: 'application/pdf' } }));
      expect(err).to.be.instanceOf(NonRetryableError);
      expect((err as NonRetryableError).type).to.equal('UnreadableDocument');
    });
  });

  describe('explorer', () => {
    it('emits one conversion per bundled file, with its mime header and the scan size, and returns the scan', async () => {
      const harness = await StageHarness.create(Explorer);
      const { emitted, result } = await harness.run({ type: 'scan.folder', args: ['acme'], tenant: 'acme' });
      expect(result).to.deep.include({ folder: 'acme', documents: 5 });
      const byName = Object.fromEntries(emitted.map((e) => [e.job.args[1], e]));
      expect(Object.keys(byName).sort()).to.deep.equal(['contacts.txt', 'invoice.html', 'notes.md', 'payroll.csv', 'report.pdf']);
      expect(byName['report.pdf']?.headers.mime).to.equal('application/pdf');
      expect(byName['invoice.html']?.headers.mime).to.equal('text/html');
      expect(byName['payroll.csv']?.headers.mime).to.equal('text/csv');
      const scanIds = new Set(emitted.map((e) => e.job.meta.scan_id));
      expect(scanIds.size).to.equal(1);
      for (const { output, job } of emitted) {
        expect(output).to.equal('conversions');
        expect(job).to.include({ type: 'doc.convert', tenant: 'acme' });
        expect(job.meta.scan_total).to.equal(5);
        const name = job.args[1] as string;
        const sent = Buffer.from((job.args[0] as { base64: string }).base64, 'base64');
        expect(sent.equals(readFileSync(path.join(BUNDLED_SAMPLES_DIR, 'acme', name))), name).to.equal(true);
      }
    });

    it('walks sub-folders of samplesDir and marks unknown types as octet-stream', async () => {
      const root = path.join(tmp, 'samples');
      await mkdir(path.join(root, 't', 'sub'), { recursive: true });
      await writeFile(path.join(root, 't', 'a.json'), '{}');
      await writeFile(path.join(root, 't', 'sub', 'b.xyz'), '');
      const harness = await StageHarness.create(Explorer, { stageOptions: { samplesDir: root } });
      const { emitted } = await harness.run({ type: 'scan.folder', args: ['t'], tenant: 'acme' });
      expect(emitted.map((e) => [e.job.args[1], e.headers.mime])).to.deep.equal([
        ['a.json', 'application/json'],
        ['sub/b.xyz', 'application/octet-stream'],
      ]);
    });

    it('refuses folders outside the samples root', async () => {
      const harness = await StageHarness.create(Explorer);
      const err = await rejection(harness.run({ type: 'scan.folder', args: ['../../..'], tenant: 'acme' }));
      expect(err).to.be.instanceOf(NonRetryableError);
      expect(err.message).to.match(/outside the samples root/);
    });
  });

  describe('reporter', () => {
    it("sums the findings the exporter wrote for the scan it follows, from the scan's result", async () => {
      const dir = path.join(tmp, 'report-results');
      const exporter = await StageHarness.create(Exporter, { stageOptions: { resultsDir: dir } });
      const email = { kind: 'email', value: 'a@b.dk' };
      const card = { kind: 'card', value: '**** 1111' };
      await exporter.run({ type: 'doc.matches', args: ['x.txt', [email, card]], tenant: 'acme', meta: { scan_id: 's1', scan_total: 2 } });
      await exporter.run({ type: 'doc.matches', args: ['y.txt', [email]], tenant: 'acme', meta: { scan_id: 's1', scan_total: 2 } });
      await exporter.run({ type: 'doc.matches', args: ['z.txt', [email]], tenant: 'acme', meta: { scan_id: 'older', scan_total: 1 } });
      const reporter = await StageHarness.create(Reporter, { stageOptions: { resultsDir: dir } });
      const scan = { scan_id: 's1', folder: 'acme', documents: 2 };
      const { result } = await reporter.run({ type: 'scan.report', args: [], tenant: 'acme', parent_results: [scan] });
      const expected = { ...scan, exported: 2, findings: 3, by_kind: { email: 2, card: 1, national_id: 0 } };
      expect(result).to.deep.equal(expected);
      expect(JSON.parse(await readFile(path.join(dir, 'acme.report.json'), 'utf8'))).to.deep.equal(expected);
    });

    it("refuses to run without a scan's result", async () => {
      const reporter = await StageHarness.create(Reporter, { stageOptions: { resultsDir: path.join(tmp, 'results') } });
      const err = await rejection(reporter.run({ type: 'scan.report', args: [], tenant: 'acme' }));
      expect(err).to.be.instanceOf(NonRetryableError);
    });
  });

  describe('exporter', () => {
    it("appends one line per document to the job's tenant's file", async () => {
      const dir = path.join(tmp, 'results');
      const harness = await StageHarness.create(Exporter, { stageOptions: { resultsDir: dir } });
      const findings = [{ kind: 'email', value: 'a@b.dk' }];
      await harness.run({ type: 'doc.matches', args: ['x.txt', findings], tenant: 'acme', meta: { scan_id: 's1', scan_total: 2 } });
      await harness.run({ type: 'doc.matches', args: ['y.txt', []], tenant: 'globex', meta: { scan_id: 's2', scan_total: 1 } });
      const acme = (await readFile(path.join(dir, 'acme.jsonl'), 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as ResultLine);
      expect(acme).to.have.length(1);
      expect(acme[0]).to.include({ document: 'x.txt', scan_id: 's1', scan_total: 2 });
      expect(acme[0]?.findings).to.deep.equal(findings);
      expect(await readFile(path.join(dir, 'globex.jsonl'), 'utf8')).to.contain('"document":"y.txt"');
    });

    it('refuses a tenant that is not a safe file name', async () => {
      const harness = await StageHarness.create(Exporter, { stageOptions: { resultsDir: path.join(tmp, 'results') } });
      const err = await rejection(harness.run({ type: 'doc.matches', args: ['x.txt', []], tenant: '../evil' }));
      expect(err).to.be.instanceOf(NonRetryableError);
    });
  });
});
