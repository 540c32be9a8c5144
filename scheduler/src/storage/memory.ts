import { randomUUID } from 'node:crypto';
import { StoreEvents, fitsAny } from './common.js';
import { DrainRate, queueFullError, storeStoppedError } from './queue-full.js';
import {
  DEFAULT_TENANT,
  isTerminalStatus,
  tenantRank,
  type Lease,
  type LeaseQuery,
  type Mutation,
  type QueueEffects,
  type QueueItem,
  type QueuedKind,
  type RecordChange,
  type RequestRecord,
  type StoreOptions,
  type SchedulerStore,
} from './types.js';

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions extends StoreOptions {
  /** Clock, for tests. */
  now?: () => number;
}

interface Entry {
  item: QueueItem;
  /** Arrival order across the pool's queues; kept when the item is released. */
  seq: number;
  /** Not to be taken before this time (a released item's back-off). */
  visibleAt: number;
  deliveries: number;
  lease?: { token: string; expiresAt: number };
}

/**
 * A pool's waiting items in dispatch order: larger priority first, then earliest deadline, then arrival. A lease that
 * orders tenants takes the first item of the best-ranked tenant, so each tenant's items keep
 * this order among themselves.
 */
class PoolOrder {
  readonly list: Entry[] = [];

  add(e: Entry): void {
    let lo = 0;
    let hi = this.list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (before(this.list[mid], e)) lo = mid + 1;
      else hi = mid;
    }
    this.list.splice(lo, 0, e);
  }

  remove(e: Entry): boolean {
    const i = this.list.indexOf(e);
    if (i === -1) return false;
    this.list.splice(i, 1);
    return true;
  }
}

function before(a: Entry, b: Entry): boolean {
  if (a.item.priority !== b.item.priority) return a.item.priority > b.item.priority;
  // Earliest deadline first within a priority (none = after every deadline).
  const da = a.item.deadline || Infinity;
  const db = b.item.deadline || Infinity;
  return da !== db ? da < db : a.seq < b.seq;
}

/**
 * The in-process store: records are live objects (`read` returns them, `update` mutates
 * them in place), and each pool's queue is one ordered list across its version-pinned
 * queues, so a free instance takes the best item it can run. Nothing is shared or survives
 * the process; this is the embedded default and as cheap as a map lookup per step.
 */
export class MemoryStore implements SchedulerStore {
  readonly backend = 'memory' as const;
  readonly durable = false;
  private readonly records = new Map<string, RequestRecord>();
  private readonly pools = new Map<string, PoolOrder>();
  private readonly entries = new Map<string, Entry>();
  /** Waiting (not leased) items per queue key. */
  private readonly waitingCounts = new Map<string, number>();
  private readonly leased = new Set<Entry>();
  private readonly drain: DrainRate;
  private readonly now: () => number;
  private readonly events = new StoreEvents();
  /** Finished requests in the order they finished; forgotten from the front. */
  private finished: Array<{ reqId: string; record: RequestRecord }> = [];
  private finishedHead = 0;
  private sweeper: NodeJS.Timeout | undefined;
  private leaseSweeper: NodeJS.Timeout | undefined;
  private seq = 0;
  /** Lease tokens: unique within this store (it is never shared), cheap to make. */
  private leases = 0;
  private readonly instanceTag = `${randomUUID().slice(0, 8)}-`;
  private stopped = false;

  constructor(private readonly opts: MemoryStoreOptions) {
    this.now = opts.now ?? Date.now;
    this.drain = new DrainRate(this.now);
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweeper);
    clearInterval(this.leaseSweeper);
    this.sweeper = undefined;
    this.leaseSweeper = undefined;
  }

  read(reqId: string): Promise<RequestRecord | undefined> {
    this.forget();
    return Promise.resolve(this.records.get(reqId));
  }

  /** The record, synchronously (the memory store's own fast path). */
  peek(reqId: string): RequestRecord | undefined {
    return this.records.get(reqId);
  }

  admit(record: RequestRecord, first: QueueItem, maxLength: number): Promise<{ record: RequestRecord; created: boolean }> {
    if (this.stopped) return Promise.reject(storeStoppedError(this.backend));
    this.forget();
    const existing = this.records.get(record.state.context.reqId);
    if (existing) return Promise.resolve({ record: existing, created: false });
    if ((this.waitingCounts.get(first.queue) ?? 0) >= maxLength) {
      return Promise.reject(queueFullError(first.queue, maxLength, this.drain.retryAfterMs(first.queue)));
    }
    record.revision = 1;
    this.records.set(record.state.context.reqId, record);
    this.enqueue(first);
    this.events.announce(record);
    return Promise.resolve({ record, created: true });
  }

  update(reqId: string, mutate: (record: RequestRecord) => Mutation): Promise<RequestRecord | undefined> {
    if (this.stopped) return Promise.reject(storeStoppedError(this.backend));
    const record = this.records.get(reqId);
    if (!record) return Promise.resolve(undefined);
    const wasTerminal = isTerminalStatus(record.state.context.status);
    const effects = mutate(record);
    if (effects === false) return Promise.resolve(undefined);
    record.revision += 1;
    this.applyEffects(effects);
    if (!wasTerminal && isTerminalStatus(record.state.context.status)) this.finish(record);
    this.events.announce(record);
    return Promise.resolve(record);
  }

  lease(query: LeaseQuery): Promise<Lease | undefined> {
    if (this.stopped) return Promise.reject(storeStoppedError(this.backend));
    this.expireLeases();
    const order = this.pools.get(query.pool);
    if (!order) return Promise.resolve(undefined);
    const now = this.now();
    const list = order.list;
    let soonest = Infinity;
    // The first fitting item of the best-ranked tenant (rank 0, a tenant not listed, is the best
    // there is: the first such item ends the search).
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i < list.length && bestRank > 0; i += 1) {
      const e = list[i];
      if (!fitsAny(e.item, query.fits)) continue;
      if (e.visibleAt > now) {
        soonest = Math.min(soonest, e.visibleAt);
        continue;
      }
      const rank = tenantRank(query.tenants, e.item.tenant);
      if (rank < bestRank) {
        best = i;
        bestRank = rank;
      }
    }
    if (best !== -1) {
      const e = list[best];
      list.splice(best, 1);
      this.waitingCounts.set(e.item.queue, (this.waitingCounts.get(e.item.queue) ?? 1) - 1);
      this.drain.out(e.item.queue);
      e.deliveries += 1;
      e.lease = { token: `${this.instanceTag}${++this.leases}`, expiresAt: now + this.opts.leaseMs };
      this.leased.add(e);
      this.leaseSweeper ??= setInterval(() => this.expireLeases(), 1000);
      this.leaseSweeper.unref();
      return Promise.resolve({ item: e.item, token: e.lease.token, deliveries: e.deliveries });
    }
    // Only items still backing off: say so when the first may be taken (a timer set for the
    // back-off may fire a little before the clock has moved on).
    if (soonest !== Infinity) setTimeout(() => this.events.queue(query.pool), Math.max(1, soonest - now + 1)).unref();
    return Promise.resolve(undefined);
  }

  renew(lease: Lease): Promise<boolean> {
    const e = this.held(lease);
    if (!e?.lease) return Promise.resolve(false);
    e.lease.expiresAt = this.now() + this.opts.leaseMs;
    return Promise.resolve(true);
  }

  apply(effects: QueueEffects): Promise<void> {
    if (this.stopped) return Promise.reject(storeStoppedError(this.backend));
    this.applyEffects(effects);
    return Promise.resolve();
  }

  waiting(queue: string): number {
    return this.waitingCounts.get(queue) ?? 0;
  }

  queueSizes(): Promise<Record<string, number>> {
    return Promise.resolve(this.queueSizesNow());
  }

  /** {@link queueSizes}, synchronously. */
  queueSizesNow(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [pool, order] of this.pools) out[pool] = order.list.length;
    return out;
  }

  queuedKinds(pool: string): Promise<QueuedKind[]> {
    const kinds = new Map<string, QueuedKind>();
    for (const e of this.pools.get(pool)?.list ?? []) {
      const key = `${e.item.queue}\u0000${e.item.model}`;
      const k = kinds.get(key);
      if (k) k.count += 1;
      else kinds.set(key, { pool, queue: e.item.queue, model: e.item.model, count: 1 });
    }
    return Promise.resolve([...kinds.values()]);
  }

  onChange(listener: (change: RecordChange) => void): () => void {
    return this.events.onChange(listener);
  }

  onQueue(listener: (pool: string) => void): () => void {
    return this.events.onQueue(listener);
  }

  // ---- internals -------------------------------------------------------------------------

  private held(lease: Lease): Entry | undefined {
    const e = this.entries.get(lease.item.id);
    return e && e.lease?.token === lease.token ? e : undefined;
  }

  private applyEffects(effects: QueueEffects): void {
    if (effects.ack) {
      const e = this.held(effects.ack);
      if (e) this.drop(e);
    }
    if (effects.release) {
      const e = this.held(effects.release.lease);
      if (e) {
        this.leased.delete(e);
        e.lease = undefined;
        e.visibleAt = this.now() + effects.release.delayMs;
        this.putBack(e);
        // Kept alive: a retry waiting out its back-off is work in flight, and an embedded
        // caller (the CLI) awaiting its request has nothing else keeping the process alive.
        this.events.later(e.item.pool, effects.release.delayMs, true);
      }
    }
    if (effects.remove) {
      const e = this.entries.get(effects.remove.id);
      if (e) this.drop(e);
    }
    if (effects.enqueue) this.enqueue(effects.enqueue);
  }

  private enqueue(item: QueueItem): void {
    if (this.entries.has(item.id)) return;
    // An item made without a tenant is the default tenant's (as the durable stores read old items).
    if (item.tenant === undefined) item = { ...item, tenant: DEFAULT_TENANT };
    const e: Entry = { item, seq: this.seq++, visibleAt: 0, deliveries: 0 };
    this.entries.set(item.id, e);
    this.putBack(e);
  }

  private putBack(e: Entry): void {
    let order = this.pools.get(e.item.pool);
    if (!order) {
      order = new PoolOrder();
      this.pools.set(e.item.pool, order);
    }
    order.add(e);
    this.waitingCounts.set(e.item.queue, (this.waitingCounts.get(e.item.queue) ?? 0) + 1);
    this.events.queue(e.item.pool);
  }

  private drop(e: Entry): void {
    this.entries.delete(e.item.id);
    if (e.lease) {
      this.leased.delete(e);
      e.lease = undefined;
      return;
    }
    if (this.pools.get(e.item.pool)?.remove(e)) {
      this.waitingCounts.set(e.item.queue, (this.waitingCounts.get(e.item.queue) ?? 1) - 1);
    }
  }

  /** Leases that ran out put their items back in place. */
  private expireLeases(): void {
    if (this.leased.size === 0) {
      clearInterval(this.leaseSweeper);
      this.leaseSweeper = undefined;
      return;
    }
    const now = this.now();
    for (const e of [...this.leased]) {
      if (e.lease && e.lease.expiresAt <= now) {
        this.leased.delete(e);
        e.lease = undefined;
        this.putBack(e);
      }
    }
  }

  private finish(record: RequestRecord): void {
    this.finished.push({ reqId: record.state.context.reqId, record });
    this.forget();
    // One timer for all finished requests (not one each), and only while some are kept.
    this.sweeper ??= setInterval(() => this.forget(), Math.min(1000, Math.max(10, this.opts.retentionMs / 2)));
    this.sweeper.unref();
  }

  /** Forgets finished requests past their retention, and the oldest beyond `maxRetained`. */
  private forget(): void {
    const list = this.finished;
    if (this.finishedHead === list.length) return;
    const now = this.now();
    while (this.finishedHead < list.length) {
      const { reqId, record } = list[this.finishedHead];
      if (record.expiresAt > now && list.length - this.finishedHead <= this.opts.maxRetained) break;
      list[this.finishedHead] = undefined as never;
      this.finishedHead += 1;
      if (this.records.get(reqId) === record) this.records.delete(reqId);
    }
    // Compact the list once its forgotten front is the larger part.
    if (this.finishedHead > 1024 && this.finishedHead * 2 > list.length) {
      this.finished = list.slice(this.finishedHead);
      this.finishedHead = 0;
    }
    if (this.finishedHead === this.finished.length && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}
