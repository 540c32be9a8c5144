/**
 * The status page: plain HTML, CSS and JavaScript from `gateway/static/`, read once at
 * start-up and served without an API key. The page's own API calls (`/api/v1/status`,
 * `/v1/models`, `/api/v1/generate`, `/v1/images/objects/…`) carry the key the user enters.
 */
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';

/** One file of the page. */
export interface StaticAsset {
  body: Buffer;
  contentType: string;
}

/**
 * The page runs only its own script and style: no inline code, no other origins. Images
 * come from the gateway (as `blob:` URLs, fetched with the key) or a canvas (`data:`).
 */
export const STATUS_PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const FILES: Record<string, { file: string; contentType: string }> = {
  '/status': { file: 'status.html', contentType: 'text/html; charset=utf-8' },
  '/status/status.js': { file: 'status.js', contentType: 'text/javascript; charset=utf-8' },
  '/status/status.css': { file: 'status.css', contentType: 'text/css; charset=utf-8' },
};

/** Reads the page's files (path → asset). Throws when one is missing: the package is broken. */
export function loadStatusPage(dir: URL = new URL('../static/', import.meta.url)): Map<string, StaticAsset> {
  const out = new Map<string, StaticAsset>();
  for (const [path, { file, contentType }] of Object.entries(FILES)) {
    out.set(path, { body: readFileSync(new URL(file, dir)), contentType });
  }
  return out;
}

/** Sends one file of the page with its security headers. */
export function sendAsset(res: ServerResponse, asset: StaticAsset): void {
  res.writeHead(200, {
    'content-type': asset.contentType,
    'content-length': String(asset.body.byteLength),
    'cache-control': 'no-cache',
    'content-security-policy': STATUS_PAGE_CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
  });
  res.end(asset.body);
}
