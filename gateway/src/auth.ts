/**
 * Security at the edge: bearer API keys, per-key token-bucket rate limits, and a limit on
 * failed authentication attempts per client address.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Code } from '@diffmesh/runtime';
import { gatewayError } from './errors.js';
import { header } from './http-util.js';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** The identity of a request's client address (the TCP peer; forwarding headers can be forged). */
export function clientAddress(req: IncomingMessage): string {
  return `addr:${req.socket.remoteAddress ?? 'unknown'}`;
}

/** Checks bearer API keys in constant time. An empty key list turns authentication off. */
export class ApiKeys {
  private readonly digests: Buffer[];

  constructor(keys: readonly string[]) {
    this.digests = [...new Set(keys)].map(digest);
  }

  get enabled(): boolean {
    return this.digests.length > 0;
  }

  /**
   * The identity a request is limited by: the key's fingerprint when authentication is on,
   * else the client address. Throws UNAUTHENTICATED for a missing or unknown key.
   */
  authenticate(req: IncomingMessage): string {
    if (!this.enabled) return clientAddress(req);
    const auth = header(req, 'authorization') ?? '';
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    const key = m?.[1] ?? header(req, 'x-api-key');
    if (!key) {
      throw gatewayError(Code.UNAUTHENTICATED, 'UNAUTHENTICATED', 'missing API key: send it as "Authorization: Bearer <key>"');
    }
    const d = digest(key);
    // Compare against every key so the time taken does not depend on which one matched.
    let ok = false;
    for (const known of this.digests) ok = timingSafeEqual(known, d) || ok;
    if (!ok) throw gatewayError(Code.UNAUTHENTICATED, 'UNAUTHENTICATED', 'invalid API key');
    return `key:${d.subarray(0, 8).toString('hex')}`;
  }
}

interface Bucket {
  tokens: number;
  updated: number;
}

/** Options of {@link RateLimiter}. */
export interface RateLimiterOptions {
  /** What a refusal says, e.g. `rate limit exceeded for this API key; retry later`. */
  message?: string;
  /** The clock (tests). */
  now?: () => number;
}

/** A token bucket per identity: `perMinute` tokens a minute, up to `burst` saved. */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly ratePerMs: number;
  private readonly burst: number;
  private readonly message: string;
  private readonly now: () => number;

  constructor(perMinute: number, burst: number, opts: RateLimiterOptions = {}) {
    this.ratePerMs = perMinute / 60_000;
    this.burst = burst > 0 ? burst : perMinute;
    this.message = opts.message ?? 'rate limit exceeded; retry later';
    this.now = opts.now ?? Date.now;
  }

  get enabled(): boolean {
    return this.ratePerMs > 0;
  }

  /** Takes a token for `id`, or throws RESOURCE_EXHAUSTED / RATE_LIMITED with a retry delay. */
  take(id: string): void {
    const b = this.refill(id);
    if (b) b.tokens -= 1;
  }

  /** Throws as {@link take} does when `id` has no token left, but takes none. */
  check(id: string): void {
    this.refill(id);
  }

  /** `id`'s bucket brought up to date (undefined when the limiter is off); throws when it is empty. */
  private refill(id: string): Bucket | undefined {
    if (!this.enabled) return undefined;
    const now = this.now();
    const b = this.buckets.get(id) ?? { tokens: this.burst, updated: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.updated) * this.ratePerMs);
    b.updated = now;
    this.buckets.set(id, b);
    if (b.tokens >= 1) return b;
    const waitMs = Math.ceil((1 - b.tokens) / this.ratePerMs);
    throw gatewayError(Code.RESOURCE_EXHAUSTED, 'RATE_LIMITED', this.message, { retryAfterMs: waitMs });
  }

  /** Forgets buckets that have filled up again (they hold no information). */
  sweep(): void {
    const now = this.now();
    for (const [id, b] of this.buckets) {
      if (b.tokens + (now - b.updated) * this.ratePerMs >= this.burst) this.buckets.delete(id);
    }
  }
}

