/**
 * The JetStream store's names: an item's subject and its parts (the kinds of a pool's items,
 * one consumer each), subject tokens, and the hashed names of streams and consumers.
 */
import { createHash } from 'node:crypto';
import { DEFAULT_TENANT } from './types.js';

/** A kind of item in a pool's stream: one (priority, queue, model, tenant), with its items' arrivals (oldest first). */
export interface Kind {
  prefix: string;
  priority: string;
  arrivals: string[];
  queue: string;
  model: string;
  tenant: string;
}

export interface KindCache {
  at: number;
  kinds: Map<string, Kind>;
}

/** How long a pool's kinds are used without reading them again. */
export const KINDS_TTL_MS = 1000;

/**
 * The parts of an item subject: `{ns}.t.{pool}.{priority}.{queue}.{model}.{tenant}.{arrival}.{id}`,
 * or the layout before tenants, without `{tenant}` (read as the default tenant). The kind's
 * prefix is everything before the arrival; its consumer filters `{prefix}.*.*`.
 */
export function parseSubject(subject: string): { prefix: string; tokens: string[]; tenant: string; arrival: string } | undefined {
  const t = subject.split('.');
  if (t.length !== 8 && t.length !== 9) return undefined;
  return {
    prefix: t.slice(0, t.length - 2).join('.'),
    tokens: t,
    tenant: t.length === 9 ? untok(t[6]) : DEFAULT_TENANT,
    arrival: t[t.length - 2],
  };
}

/** Adds an item subject to its kind. */
export function addKind(kinds: Map<string, Kind>, subject: string): void {
  const p = parseSubject(subject);
  if (!p) return;
  const t = p.tokens;
  const k = kinds.get(p.prefix);
  if (!k) {
    kinds.set(p.prefix, {
      prefix: p.prefix,
      priority: t[3],
      arrivals: [p.arrival],
      queue: untok(t[4]),
      model: untok(t[5]),
      tenant: p.tenant,
    });
    return;
  }
  if (k.arrivals.includes(p.arrival)) return;
  let i = k.arrivals.length;
  while (i > 0 && k.arrivals[i - 1] > p.arrival) i -= 1;
  k.arrivals.splice(i, 0, p.arrival);
}

/** Takes an item subject out of its kind (it was leased). */
export function takeKind(kinds: Map<string, Kind>, subject: string): void {
  const p = parseSubject(subject);
  const k = p && kinds.get(p.prefix);
  if (!p || !k) return;
  k.arrivals = k.arrivals.filter((a) => a !== p.arrival);
  if (k.arrivals.length === 0) kinds.delete(k.prefix);
}

/** A subject token for any string: base64url, never empty. */
export function tok(s: string): string {
  return s === '' ? '_' : Buffer.from(s, 'utf8').toString('base64url');
}

export function untok(t: string): string {
  return t === '_' ? '' : Buffer.from(t, 'base64url').toString('utf8');
}

export function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Hashes of stream and consumer names, computed once each (every lease and publish names one). */
const hashes = new Map<string, string>();

export function hash(s: string, n = 16): string {
  const key = `${n}:${s}`;
  let h = hashes.get(key);
  if (h === undefined) {
    h = createHash('sha1').update(s).digest('hex').slice(0, n);
    if (hashes.size >= 10_000) hashes.clear();
    hashes.set(key, h);
  }
  return h;
}

/** The JetStream API's code for a stream, consumer, message or key that does not exist. */
const JS_NOT_FOUND = 404;

/** True for a JetStream or KV error that means the thing asked for does not exist. */
export function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; api_error?: { code?: number }; message?: string };
  return (
    e?.code === String(JS_NOT_FOUND) ||
    e?.code === JS_NOT_FOUND ||
    e?.api_error?.code === JS_NOT_FOUND ||
    /not found|no message/i.test(String(e?.message ?? ''))
  );
}
