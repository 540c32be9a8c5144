/**
 * Security at the edge: bearer API keys and per-key token-bucket rate limits.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Code, type DiffmeshError } from '@diffmesh/runtime';
import { gatewayError } from './errors.js';
import { header } from './http-util.js';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

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
    if (!this.enabled) return `addr:${req.socket.remoteAddress ?? 'unknown'}`;
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

/** A token bucket per identity: `perMinute` tokens a minute, up to `burst` saved. */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly ratePerMs: number;
  private readonly burst: number;

  constructor(
    perMinute: number,
    burst: number,
    private readonly now: () => number = Date.now,
  ) {
    this.ratePerMs = perMinute / 60_000;
    this.burst = burst > 0 ? burst : perMinute;
  }

  get enabled(): boolean {
    return this.ratePerMs > 0;
  }

  /** Takes a token for `id`, or throws RESOURCE_EXHAUSTED / RATE_LIMITED with a retry delay. */
  take(id: string): void {
    if (!this.enabled) return;
    const now = this.now();
    const b = this.buckets.get(id) ?? { tokens: this.burst, updated: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.updated) * this.ratePerMs);
    b.updated = now;
    this.buckets.set(id, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return;
    }
    const waitMs = Math.ceil((1 - b.tokens) / this.ratePerMs);
    throw rateLimited(waitMs);
  }

  /** Forgets buckets that have filled up again (they hold no information). */
  sweep(): void {
    const now = this.now();
    for (const [id, b] of this.buckets) {
      if (b.tokens + (now - b.updated) * this.ratePerMs >= this.burst) this.buckets.delete(id);
    }
  }
}

function rateLimited(waitMs: number): DiffmeshError {
  return gatewayError(Code.RESOURCE_EXHAUSTED, 'RATE_LIMITED', 'rate limit exceeded for this API key; retry later', { retryAfterMs: waitMs });
}
