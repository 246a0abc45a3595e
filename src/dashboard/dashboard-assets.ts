import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The page's files: `dashboard/` at the package root (this file runs as
 * `dist/src/dashboard/dashboard-assets.js`, three folders below it, in the repository, in
 * `node_modules/stagecoach` and in the image alike).
 */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../../dashboard/', import.meta.url));

/**
 * The libraries the page imports, by the bare names its import map gives them, served from this
 * package's own node_modules: no CDN (operators' machines may be offline) and no build step.
 */
const VENDOR: Record<string, string> = {
  'preact.mjs': 'preact',
  'preact-hooks.mjs': 'preact/hooks',
  'htm.mjs': 'htm',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  type: string;
  body: Buffer;
}

/** Serves the dashboard page; the admin server asks it first and routes whatever it declines to its API. */
export interface DashboardAssets {
  /** Answers `GET`/`HEAD` of `/` and `/dashboard/...` and returns true; returns false for anything else. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

/**
 * Reads the page and the vendored libraries once, at start: a few dozen kilobytes, served from
 * memory, and a missing file fails `stagecoach admin` at start rather than a browser later.
 *
 * Every answer carries a Content-Security-Policy allowing only this origin's scripts and the
 * page's one inline script (its import map, by hash), no framing and no form posts elsewhere:
 * the page shows job bodies and headers that anyone able to publish wrote, and holds the admin
 * token, so nothing it shows may ever run.
 */
export async function loadDashboardAssets(dir: string = DASHBOARD_DIR): Promise<DashboardAssets> {
  const assets = new Map<string, Asset>();
  for (const name of await readdir(dir)) {
    const type = TYPES[path.extname(name)];
    if (type !== undefined) assets.set(`/dashboard/${name}`, { type, body: await readFile(path.join(dir, name)) });
  }
  for (const [file, specifier] of Object.entries(VENDOR)) {
    assets.set(`/dashboard/vendor/${file}`, { type: TYPES['.mjs'], body: await readFile(fileURLToPath(import.meta.resolve(specifier))) });
  }
  const index = assets.get('/dashboard/index.html');
  if (index === undefined) throw new Error(`dashboard: no index.html in ${dir}`);
  assets.set('/', index);
  const csp = contentSecurityPolicy(index.body.toString('utf8'));

  return {
    handle(req, res) {
      if (req.method !== 'GET' && req.method !== 'HEAD') return false;
      const pathname = pathnameOf(req.url);
      const asset = pathname === undefined ? undefined : assets.get(pathname);
      if (asset === undefined) return false;
      res.writeHead(200, {
        'Content-Type': asset.type,
        'Content-Length': asset.body.length,
        // Revalidated on every load, so an upgraded server never runs with an old page.
        'Cache-Control': 'no-cache',
        'Content-Security-Policy': csp,
        'X-Content-Type-Options': 'nosniff',
        'Referrer-Policy': 'no-referrer',
        'X-Frame-Options': 'DENY',
      });
      res.end(req.method === 'HEAD' ? undefined : asset.body);
      return true;
    },
  };
}

/** The path of a request target; a target that does not parse is left to the API, which answers it. */
function pathnameOf(target: string | undefined): string | undefined {
  try {
    return new URL(target ?? '/', 'http://admin.invalid').pathname;
  } catch {
    return undefined;
  }
}

/** The policy for the page: its inline scripts (the import map) allowed by their hash, nothing else inline. */
function contentSecurityPolicy(html: string): string {
  const hashes = [...html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)]
    .map((match) => match[1])
    .filter((content) => content.trim() !== '')
    .map((content) => `'sha256-${createHash('sha256').update(content, 'utf8').digest('base64')}'`);
  return [
    "default-src 'none'",
    `script-src 'self' ${hashes.join(' ')}`.trim(),
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}
