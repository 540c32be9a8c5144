/**
 * Security at the edge: bearer API keys, per-key token-bucket rate limits, a limit on failed
 * authentication attempts per client address, and the auth step ({@link Gatekeeper}) that
 * applies them to a request.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { apiKeyOf, Code, TenantDirectory, type Logger } from '@diffmesh/core';
import type { GatewayConfig } from './config.js';
import { gatewayError } from './errors.js';
import { header } from './http-util.js';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** The identity of a request's client address (the TCP peer; forwarding headers can be forged). */
export function clientAddress(req: IncomingMessage): string {
  return `addr:${req.socket.remoteAddress ?? 'unknown'}`;
}

/** The API key a request sends: `Authorization: Bearer <key>`, or `X-Api-Key: <key>`. */
export function requestApiKey(req: IncomingMessage): string | undefined {
  return apiKeyOf(header(req, 'authorization'), header(req, 'x-api-key'));
}

/**
 * Checks bearer API keys in constant time: the tenants file's keys when there is one (each
 * key names its tenant), else the configured key list. No keys at all turns authentication
 * off.
 */
export class ApiKeys {
  private readonly digests: Buffer[];

  constructor(
    keys: readonly string[],
    private readonly tenants: TenantDirectory = TenantDirectory.open(),
  ) {
    this.digests = [...new Set(keys)].map(digest);
  }

  get enabled(): boolean {
    return this.tenants.enabled || this.digests.length > 0;
  }

  /**
   * The identity a request is limited by: its tenant (`tenant:<name>`) with a tenants file,
   * the key's fingerprint with a key list, else the client address. Throws UNAUTHENTICATED
   * for a missing or unknown key.
   */
  authenticate(req: IncomingMessage): string {
    if (!this.enabled) return clientAddress(req);
    const key = requestApiKey(req);
    if (!key) {
      throw gatewayError(Code.UNAUTHENTICATED, 'UNAUTHENTICATED', 'missing API key: send it as "Authorization: Bearer <key>"');
    }
    if (this.tenants.enabled) {
      const tenant = this.tenants.byApiKey(key);
      if (!tenant) throw gatewayError(Code.UNAUTHENTICATED, 'UNAUTHENTICATED', 'invalid API key');
      return `tenant:${tenant.name}`;
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

/** The settings {@link Gatekeeper} reads. */
export type GatekeeperConfig = Pick<GatewayConfig, 'apiKeys' | 'rateLimitPerMinute' | 'rateLimitBurst' | 'authFailuresPerMinute'>;

/** Who sent a request, as the routes use it. */
export interface Caller {
  /** Its identity when authentication is on (its tenant, or its key): video jobs are scoped to it. */
  owner?: string;
  /** The API key it sent, passed on to the scheduler, which scopes requests to the key's tenant. */
  apiKey?: string;
}

/**
 * The auth step of every request to a route that is not open: the API key (or the client
 * address when authentication is off) is the request's identity, and each identity has a
 * rate limit. Failed attempts cost tokens of the client address, so keys cannot be guessed
 * at full speed.
 */
export class Gatekeeper {
  private readonly keys: ApiKeys;
  private readonly limiter: RateLimiter;
  private readonly authFailures: RateLimiter;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    config: GatekeeperConfig,
    private readonly log: Logger,
    tenants?: TenantDirectory,
  ) {
    this.keys = new ApiKeys(config.apiKeys, tenants);
    this.limiter = new RateLimiter(config.rateLimitPerMinute, config.rateLimitBurst, {
      message: `rate limit exceeded for this ${this.keys.enabled ? 'API key' : 'client address'}; retry later`,
    });
    this.authFailures = new RateLimiter(this.keys.enabled ? config.authFailuresPerMinute : 0, 0, {
      message: 'too many failed authentication attempts from this client address; retry later',
    });
    this.sweeper = setInterval(() => {
      this.limiter.sweep();
      this.authFailures.sweep();
    }, 60_000);
    this.sweeper.unref();
  }

  /** Whether API keys are required. */
  get authenticated(): boolean {
    return this.keys.enabled;
  }

  /**
   * Authenticates `req` and takes a token of its identity's rate limit (throws 401 or 429).
   * Returns who the caller is when authentication is on.
   */
  admit(req: IncomingMessage, route: string): Caller {
    const identity = this.authenticate(req);
    try {
      this.limiter.take(identity);
    } catch (err) {
      this.log.info({ identity, route }, 'rate limited');
      throw err;
    }
    if (!this.keys.enabled) return {};
    const apiKey = requestApiKey(req);
    return { owner: identity, ...(apiKey ? { apiKey } : {}) };
  }

  /** Stops forgetting full buckets. */
  close(): void {
    clearInterval(this.sweeper);
  }

  /**
   * The request's identity (API key, or client address when authentication is off). An
   * address that has used up its failed attempts is refused (429) before its key is even
   * looked at, so a guess that happens to be right is refused too.
   */
  private authenticate(req: IncomingMessage): string {
    const address = clientAddress(req);
    try {
      this.authFailures.check(address);
    } catch (err) {
      this.log.info({ address }, 'too many failed authentication attempts');
      throw err;
    }
    try {
      return this.keys.authenticate(req);
    } catch (err) {
      this.authFailures.take(address); // check() left at least one token
      throw err;
    }
  }
}
