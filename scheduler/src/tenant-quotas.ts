/**
 * Tenant limits at admission ({@link TenantLimits}): requests per minute (a token bucket),
 * the cost of the tenant's tasks running now, and the cost of its accepted work not yet
 * running. A request over a limit is refused at once with `RESOURCE_EXHAUSTED` /
 * `TENANT_QUOTA` (HTTP 429 through the gateway), naming the limit, with a `retryAfterMs`
 * from the tenant's place in the queue: the cost of its work that must drain first ÷ the rate
 * at which its work has been finishing here.
 *
 * Counts are this scheduler's own view: the requests it accepted and the tasks running on the
 * instances it holds. Schedulers sharing a store each enforce the limits on what they see, so
 * N schedulers let a tenant up to N times its limits (give each scheduler its share of the
 * tenant's limits, or send a tenant's traffic to one scheduler).
 */
import { Code, DiffmeshError } from '@diffmesh/core';
import type { TenantLimits, TenantPolicy } from './fair-share.js';
import { DEFAULT_RETRY_AFTER_MS } from './storage/queue-full.js';

/** Bounds of the suggested delay. */
const MIN_RETRY_AFTER_MS = 100;
const MAX_RETRY_AFTER_MS = 60_000;

/** Task ends kept per tenant to measure its finishing rate, and for how long. */
const RATE_SAMPLES = 32;
const RATE_WINDOW_MS = 60_000;

/** Which limit refused a request (the error's `limit` metadata). */
export type TenantLimitName = 'requests_per_minute' | 'concurrent_cost' | 'queued_cost';

interface Book {
  /** Cost of the tenant's tasks running on this scheduler's instances. */
  running: number;
  /** Cost of the stages not yet finished of the tenant's requests accepted here. */
  remaining: number;
  /** Token bucket of `requestsPerMinute`. */
  tokens: number;
  refilledAt: number;
  /** Recent task ends (time, cost), oldest first: the tenant's finishing rate. */
  ends: Array<{ at: number; cost: number }>;
}

interface Accepted {
  tenant: string;
  /** Cost of each stage of its plan. */
  costs: number[];
  /** The stage it is at (its earlier stages are done). */
  stage: number;
  /** Whether its token was taken (given back if the request is not stored after all). */
  token: boolean;
}

/** Per-tenant usage and limits of one scheduler (see the file comment). */
export class TenantQuotas {
  private readonly books = new Map<string, Book>();
  private readonly requests = new Map<string, Accepted>();
  /** Every tenant's task ends: the fallback rate for a tenant with none of its own. */
  private readonly allEnds: Array<{ at: number; cost: number }> = [];

  constructor(
    private readonly policy: TenantPolicy,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Admits request `reqId` of `tenant` whose stages cost `costs`, or throws `RESOURCE_EXHAUSTED`
   * / `TENANT_QUOTA`. Counted at once (a burst cannot pass a limit together); call
   * {@link withdraw} if the request is not stored after all, {@link ended} when it ends.
   */
  admit(reqId: string, tenant: string, costs: number[]): void {
    const limits = this.policy.limits(tenant);
    const book = this.book(tenant);
    const now = this.now();
    const total = costs.reduce((a, b) => a + b, 0);
    const rpm = limits.requestsPerMinute;
    if (rpm !== undefined) {
      const capacity = Math.max(1, rpm);
      book.tokens = Math.min(capacity, book.tokens + ((now - book.refilledAt) * rpm) / 60_000);
      book.refilledAt = now;
      if (book.tokens < 1) {
        const wait = rpm > 0 ? ((1 - book.tokens) * 60_000) / rpm : MAX_RETRY_AFTER_MS;
        throw quotaError(tenant, 'requests_per_minute', `over its limit of ${rpm} requests per minute`, clamp(wait), limits);
      }
    }
    const queued = this.queued(book);
    const concurrent = limits.concurrentCost;
    if (concurrent !== undefined && book.running > 0 && book.running + (costs[0] ?? 0) > concurrent) {
      // Its running work must fall below the limit, and what waits ahead of this request runs first.
      const ahead = queued + book.running + (costs[0] ?? 0) - concurrent;
      throw quotaError(
        tenant,
        'concurrent_cost',
        `over its concurrent cost limit (${fmt(book.running)} running + ${fmt(costs[0] ?? 0)} > ${fmt(concurrent)})`,
        this.retryAfter(book, ahead, now),
        limits,
      );
    }
    const queuedLimit = limits.queuedCost;
    if (queuedLimit !== undefined && queued > 0 && queued + total > queuedLimit) {
      throw quotaError(
        tenant,
        'queued_cost',
        `over its queued cost limit (${fmt(queued)} waiting + ${fmt(total)} > ${fmt(queuedLimit)})`,
        this.retryAfter(book, queued + total - queuedLimit, now),
        limits,
      );
    }
    if (rpm !== undefined) book.tokens -= 1;
    // Two submissions racing with one client request id: one of them is counted (and the
    // other's withdrawal may leave neither: an undercount, never a leak).
    const racing = this.requests.get(reqId);
    if (racing) this.forget(reqId, racing);
    book.remaining += total;
    this.requests.set(reqId, { tenant, costs, stage: 0, token: rpm !== undefined });
  }

  /** A request {@link admit}ted was not stored after all (refused later, or seen before): nothing counts. */
  withdraw(reqId: string): void {
    const r = this.requests.get(reqId);
    if (!r) return;
    this.forget(reqId, r);
    const book = this.book(r.tenant);
    const rpm = this.policy.limits(r.tenant).requestsPerMinute;
    if (r.token && rpm !== undefined) book.tokens = Math.min(Math.max(1, rpm), book.tokens + 1);
  }

  /** A request accepted here moved to stage `stageIndex` (the ones before it are done). */
  moved(reqId: string, stageIndex: number): void {
    const r = this.requests.get(reqId);
    if (!r || stageIndex <= r.stage) return;
    const book = this.book(r.tenant);
    for (let i = r.stage; i < stageIndex && i < r.costs.length; i += 1) book.remaining -= r.costs[i];
    r.stage = stageIndex;
  }

  /** A request accepted here ended. */
  ended(reqId: string): void {
    const r = this.requests.get(reqId);
    if (r) this.forget(reqId, r);
  }

  /** A task of `tenant` costing `cost` started on an instance of this scheduler. */
  taskStarted(tenant: string, cost: number): void {
    this.book(tenant).running += cost;
  }

  /** That task ended (whatever its outcome): its cost no longer runs. */
  taskEnded(tenant: string, cost: number): void {
    const book = this.book(tenant);
    book.running = Math.max(0, book.running - cost);
    const end = { at: this.now(), cost };
    push(book.ends, end);
    push(this.allEnds, end);
  }

  /** What `tenant` uses now, as this scheduler sees it. */
  usage(tenant: string): { running: number; queued: number } {
    const book = this.books.get(tenant);
    return book ? { running: book.running, queued: this.queued(book) } : { running: 0, queued: 0 };
  }

  private queued(book: Book): number {
    return Math.max(0, book.remaining - book.running);
  }

  private forget(reqId: string, r: Accepted): void {
    this.requests.delete(reqId);
    const book = this.book(r.tenant);
    for (let i = r.stage; i < r.costs.length; i += 1) book.remaining -= r.costs[i];
    if (book.remaining < 1e-6) book.remaining = 0;
  }

  private book(tenant: string): Book {
    let b = this.books.get(tenant);
    if (!b) {
      const rpm = this.policy.limits(tenant).requestsPerMinute;
      b = { running: 0, remaining: 0, tokens: rpm !== undefined ? Math.max(1, rpm) : 0, refilledAt: this.now(), ends: [] };
      this.books.set(tenant, b);
    }
    return b;
  }

  /** How long until `ahead` of the tenant's cost has drained, at its measured rate (else everyone's). */
  private retryAfter(book: Book, ahead: number, now: number): number {
    const rate = rateOf(book.ends, now) ?? rateOf(this.allEnds, now);
    if (rate === undefined) return DEFAULT_RETRY_AFTER_MS;
    return clamp(Math.max(0, ahead) / rate);
  }
}

/** Cost finished per ms over the recent ends (undefined with fewer than two). */
function rateOf(ends: Array<{ at: number; cost: number }>, now: number): number | undefined {
  const recent = ends.filter((e) => now - e.at <= RATE_WINDOW_MS);
  if (recent.length < 2) return undefined;
  const span = Math.max(1, now - recent[0].at);
  const cost = recent.slice(1).reduce((a, e) => a + e.cost, 0);
  return cost > 0 ? cost / span : undefined;
}

function push(list: Array<{ at: number; cost: number }>, e: { at: number; cost: number }): void {
  list.push(e);
  if (list.length > RATE_SAMPLES) list.shift();
}

function clamp(ms: number): number {
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(MIN_RETRY_AFTER_MS, Math.round(ms)));
}

function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toPrecision(4);
}

/** `RESOURCE_EXHAUSTED` / `TENANT_QUOTA` naming the tenant and its limit. */
function quotaError(tenant: string, limit: TenantLimitName, what: string, retryAfterMs: number, limits: TenantLimits): DiffmeshError {
  const value =
    limit === 'requests_per_minute' ? limits.requestsPerMinute : limit === 'concurrent_cost' ? limits.concurrentCost : limits.queuedCost;
  return new DiffmeshError(
    Code.RESOURCE_EXHAUSTED,
    'TENANT_QUOTA',
    `tenant "${tenant}" is ${what}; retry in ${Math.ceil(retryAfterMs / 1000)}s`,
    { retryAfterMs, metadata: { tenant, limit, value: String(value) } },
  );
}
