import { createRequire } from 'node:module';
import path from 'node:path';
import { getDocument } from 'pdfjs-dist/legacy/build/pdf.mjs';

// pdf.js reads the metrics of the 14 standard fonts (Helvetica...) from files it ships; without
// them it warns on every document. In Node it reads a plain directory path.
const STANDARD_FONTS =
  path.join(path.dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json')), 'standard_fonts') + path.sep;

/**
 * The text of every page, one line per text line. The legacy build is the one pdf.js supports
 * in Node; it runs its parser in-process (no worker thread) when no worker is configured.
 */
export async function pdfText(bytes: Uint8Array): Promise<string> {
  // pdf.js refuses a Node Buffer and may detach what it is given: hand it a plain Uint8Array copy.
  const document = await getDocument({
    data: new Uint8Array(bytes),
    standardFontDataUrl: STANDARD_FONTS,
    isEvalSupported: false,
    verbosity: 0,
  }).promise;
  try {
    const pages: string[] = [];
    for (let number = 1; number <= document.numPages; number++) {
      const page = await document.getPage(number);
      const content = await page.getTextContent();
      pages.push(content.items.map((item) => ('str' in item ? item.str + (item.hasEOL ? '\n' : '') : '')).join(''));
      page.cleanup();
    }
    return pages.join('\n');
  } finally {
    await document.destroy();
  }
}
