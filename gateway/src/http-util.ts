import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code } from '@diffmesh/core';
import { HttpStatusError, bodyTooLarge, gatewayError } from './errors.js';
import { readMultipart } from './multipart.js';
import { previewName } from './proto-json.js';

/**
 * Reads a request body up to `maxBytes`. A larger declared or actual body is a 413; the
 * rest of an oversize body is not read (the connection is closed after the answer).
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.reject(bodyTooLarge(maxBytes));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let failed = false;
    const onData = (chunk: Buffer): void => {
      if (failed) return;
      total += chunk.length;
      if (total > maxBytes) {
        // Stop keeping the bytes but let the socket drain: the 413 must still reach the client.
        failed = true;
        chunks.length = 0;
        reject(bodyTooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    let ended = false;
    req.once('end', () => {
      ended = true;
      if (!failed) resolve(Buffer.concat(chunks, total));
    });
    req.once('close', () => {
      if (!ended && !failed) reject(gatewayError(Code.CANCELLED, 'CANCELLED', 'the client went away while sending the body'));
      failed = true;
    });
    req.once('error', (err) => {
      if (!failed) reject(err);
      failed = true;
    });
  });
}

/**
 * Whether a body of this content type may be read as JSON. Many clients send JSON labelled
 * `text/plain` (fetch with a string body) or form-urlencoded (`curl -d`), so only types
 * that cannot be JSON are refused.
 */
function mayBeJson(contentType: string | undefined): boolean {
  if (!contentType) return true;
  const base = contentType.split(';')[0].trim().toLowerCase();
  return !/^(multipart\/|image\/|audio\/|video\/|application\/(octet-stream|x-protobuf|grpc|protobuf))/.test(base);
}

/**
 * Parses a JSON request body into an object. Empty bodies are `{}`; malformed JSON is a
 * 400 naming the problem; a body that is not an object is a 400 too.
 */
export function parseJsonObject(body: Buffer, contentType: string | undefined): Record<string, unknown> {
  if (!mayBeJson(contentType)) {
    throw new HttpStatusError(415, 'UNSUPPORTED_MEDIA_TYPE', `content type "${contentType}" is not supported; send application/json`);
  }
  const text = body.toString('utf8').trim();
  if (text === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `request body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw gatewayError(
      Code.INVALID_ARGUMENT,
      'INVALID_PARAMETER',
      `request body must be a JSON object, got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}`,
    );
  }
  return value as Record<string, unknown>;
}

/** Whether `body` starts with `{` (after white space). */
function looksLikeJsonObject(body: Buffer): boolean {
  for (const byte of body) {
    if (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d) continue;
    return byte === 0x7b;
  }
  return false;
}

/** Body limits of an OpenAI-style POST. */
export interface BodyLimits {
  /** Largest body without its files (a JSON body, or a form's text values together). */
  maxBodyBytes: number;
  /**
   * Form fields that take a file (an image), and the largest file. The files' bytes come on
   * top of `maxBodyBytes`; a JSON body may carry one such image as a base64 data URL.
   */
  files?: { fields: readonly string[]; maxFileBytes: number };
}

/** Most text fields an OpenAI-style form may hold. */
const MAX_FORM_FIELDS = 64;

/** Length of the base64 form of `bytes` bytes, plus room for a data URL's header. */
export function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4 + 256;
}

/**
 * Reads the body of an OpenAI-style POST: JSON, or form data — `multipart/form-data` (what the
 * openai SDK sends for uploads and for videos; read with busboy, files within their limits) or
 * `application/x-www-form-urlencoded`. A urlencoded body that starts with `{` is JSON:
 * `curl -d '{…}'` labels JSON that way. Form values are strings, and files {@link UploadedFile}s.
 */
export async function readJsonOrForm(req: IncomingMessage, limits: BodyLimits): Promise<Record<string, unknown>> {
  const contentType = header(req, 'content-type');
  const base = (contentType ?? '').split(';')[0].trim().toLowerCase();
  const files = limits.files;
  if (base === 'multipart/form-data') {
    return readMultipart(req, {
      maxBodyBytes: limits.maxBodyBytes + (files ? files.fields.length * files.maxFileBytes : 0),
      fileFields: files?.fields ?? [],
      maxFileBytes: files?.maxFileBytes ?? 0,
      maxFieldBytes: limits.maxBodyBytes,
      maxFields: MAX_FORM_FIELDS,
    });
  }
  const body = await readBody(req, limits.maxBodyBytes + (files ? base64Length(files.maxFileBytes) : 0));
  const isForm = base === 'application/x-www-form-urlencoded' && !looksLikeJsonObject(body);
  let out: Record<string, unknown>;
  if (!isForm) out = parseJsonObject(body, contentType);
  else {
    const entries: [string, unknown][] = [];
    const seen = new Set<string>();
    for (const [k, v] of new URLSearchParams(body.toString('utf8'))) {
      if (seen.has(k)) throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'is given more than once', { field: previewName(k) });
      seen.add(k);
      entries.push([k, v]);
    }
    out = Object.fromEntries(entries); // own properties, `__proto__` included
  }
  // The allowance is for an image's data URL only: the rest of the body keeps the plain limit.
  if (body.length > limits.maxBodyBytes && body.length - dataUrlLength(out) > limits.maxBodyBytes) throw bodyTooLarge(limits.maxBodyBytes);
  return out;
}

/** Characters of the longest `data:` URL in a parsed body (a few levels down), or 0. */
function dataUrlLength(value: unknown, depth = 0): number {
  if (typeof value === 'string') return value.startsWith('data:') ? value.length : 0;
  if (depth > 3 || typeof value !== 'object' || value === null) return 0;
  let longest = 0;
  for (const v of Object.values(value)) longest = Math.max(longest, dataUrlLength(v, depth + 1));
  return longest;
}

/** Writes a JSON response (unless the response has already started). */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/** Writes bytes with backpressure; resolves false when the client went away. */
export async function writeChunk(res: ServerResponse, chunk: string | Uint8Array): Promise<boolean> {
  if (res.destroyed || res.writableEnded) return false;
  if (res.write(chunk)) return true;
  return new Promise<boolean>((resolve) => {
    const done = (ok: boolean) => () => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

/** Streams a byte array in slices, with backpressure; stops when the client goes away. */
export async function sendBytes(res: ServerResponse, bytes: Uint8Array, headers: Record<string, string>): Promise<void> {
  res.writeHead(200, { 'content-length': String(bytes.byteLength), ...headers });
  const slice = 64 * 1024;
  for (let off = 0; off < bytes.byteLength; off += slice) {
    if (!(await writeChunk(res, bytes.subarray(off, Math.min(off + slice, bytes.byteLength))))) return;
  }
  res.end();
}

/** An AbortSignal that fires when the client disconnects before the response is complete. */
export function clientGone(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** Decodes percent-encoding (`decodeURIComponent`), or undefined when it is malformed. */
export function percentDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/**
 * Parses a query string as URLSearchParams does, but refuses malformed percent-encoding
 * (which URLSearchParams keeps as it is) with a 400 naming the parameter.
 */
export function parseQuery(raw: string): URLSearchParams {
  for (const part of raw.split('&')) {
    const eq = part.indexOf('=');
    const name = eq === -1 ? part : part.slice(0, eq);
    const decodedName = percentDecode(name.replace(/\+/g, ' '));
    if (decodedName === undefined || (eq !== -1 && percentDecode(part.slice(eq + 1).replace(/\+/g, ' ')) === undefined)) {
      throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'malformed percent-encoding in the query string', {
        field: previewName(decodedName ?? name),
      });
    }
  }
  return new URLSearchParams(raw);
}

/** The first value of a header. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/** Whether the client asked for server-sent events. */
export function wantsEventStream(req: IncomingMessage): boolean {
  return (header(req, 'accept') ?? '').toLowerCase().includes('text/event-stream');
}
