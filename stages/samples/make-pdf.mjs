// Writes the two sample PDFs (acme/report.pdf, globex/statement.pdf): `node stages/samples/make-pdf.mjs`.
// Hand-built rather than produced by a PDF library so the bytes stay tiny, deterministic (no
// dates, no ids) and readable: one page, an uncompressed text stream in the standard Helvetica
// font, and an exact cross-reference table so pdf.js parses it without falling back to repair.
import { writeFileSync } from 'node:fs';

const documents = {
  'acme/report.pdf': [
    'ACME quarterly report (synthetic test data)',
    'Questions: finance@acme.example',
    'Corporate card: 5555-5555-5555-4444',
    'Controller CPR: 311299-1001',
  ],
  'globex/statement.pdf': [
    'Globex account statement (synthetic test data)',
    'Contact: accounts@globex.example',
    'Card on file: 4012 8888 8888 1881',
    'Account holder CPR: 070761-4285',
  ],
};

/** PDF literal strings: backslash and parentheses must be escaped. */
const literal = (text) => `(${text.replace(/[\\()]/g, (c) => `\\${c}`)})`;

function pdf(lines) {
  const content = ['BT', '/F1 12 Tf', '14 TL', '50 780 Td', ...lines.map((line) => `${literal(line)} Tj T*`), 'ET'].join('\n');
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>',
    `<< /Length ${Buffer.byteLength(content, 'latin1')} >>\nstream\n${content}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>',
  ];
  let out = '%PDF-1.4\n';
  const offsets = objects.map((body, i) => {
    const offset = Buffer.byteLength(out, 'latin1');
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
    return offset;
  });
  const xref = Buffer.byteLength(out, 'latin1');
  // Every xref entry is exactly 20 bytes: 10-digit offset, 5-digit generation, type, space + LF.
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  out += offsets.map((offset) => `${String(offset).padStart(10, '0')} 00000 n \n`).join('');
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

for (const [file, lines] of Object.entries(documents)) {
  writeFileSync(new URL(file, import.meta.url), pdf(lines));
  console.log(`wrote ${file}`);
}
