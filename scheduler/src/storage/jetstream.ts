import { randomUUID } from 'node:crypto';
import {
  AckPolicy,
  DeliverPolicy,
  RetentionPolicy,
  StorageType,
  connect,
  nanos,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type KV,
  type NatsConnection,
  type Subscription,
} from 'nats';
import { Code, DiffmeshError } from '@diffmesh/core';
import { natsConnectionOptions, type NatsTlsFiles } from '@diffmesh/discovery';
import { copyRecord, decodeItem, decodeRecord, encodeItem, encodeRecord } from './codec.js';
import { StoreEvents, casLoop, changeOf, fitsAny, priorityKey, setPosition } from './common.js';
import { DrainRate, queueFullError, storeStoppedError } from './queue-full.js';
import { WrittenRecords } from './written.js';
import {
  KINDS_TTL_MS,
  addKind,
  cmp,
  hash,
  isNotFound,
  parseSubject,
  takeKind,
  tok,
  untok,
  type Kind,
  type KindCache,
} from './jetstream-subjects.js';
import {
  DEFAULT_TENANT,
  tenantRank,
  type Lease,
  type LeaseQuery,
  type Mutation,
  type QueueEffects,
  type QueueItem,
  type QueuedKind,
  type RecordChange,
  type RequestRecord,
  type SchedulerStore,
  type StoreOptions,
} from './types.js';

/** Options of {@link JetStreamStore}. */
export interface JetStreamStoreOptions extends StoreOptions {
  /** NATS server(s) with JetStream on, e.g. `nats://127.0.0.1:4222`. */
  url: string;
  /** Names streams, subjects and the bucket: stores with one namespace share state. Default `diffmesh`. */
  namespace?: string;
  /** File with the NATS credentials (an nkey seed, a `.creds` file or `user:password`). */
  credentialsFile?: string;
  /** TLS of the NATS connection (PEM files; see `natsConnectionOptions` of discovery). */
  natsTls?: NatsTlsFiles;
  /** How long JetStream remembers a task's `Nats-Msg-Id` to drop a repeated publish. Default 10 minutes. */
  duplicateWindowMs?: number;
}

/** A leased message and when its lease was last renewed (locally). */
interface Held {
  msg: JsMsg;
  stream: string;
  renewedAt: number;
}

/** The least time a KV entry may live (the bucket's age limit): see the class comment. */
const MIN_BUCKET_AGE_MS = 24 * 3600_000;

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * The shared store on NATS JetStream (nats-server 2.9 or newer).
 *
 * - **Queues**: a work-queue stream per pool. An item is one message on the subject
 *   `{ns}.t.{pool}.{priority}.{queue}.{model}.{tenant}.{arrival}.{id}` (tokens base64url;
 *   `priority` inverted and zero-padded so that a smaller token is a larger priority). Items
 *   published before tenants existed have no `{tenant}` token: they are read as the default
 *   tenant's and taken by consumers of their own, so a stream may hold both layouts while
 *   old items drain (no migration step). JetStream 2.9 has no priorities and no
 *   multi-filter consumers, so each (priority, queue, model, tenant) has its own durable pull
 *   consumer; a lease first reads the stream's subject counts (`subjects_filter`), takes the
 *   kinds a free slot can run in order — the lease's tenant order (fair share), then larger
 *   priority, then the kind whose oldest item arrived first — and pulls one message
 *   (`no_wait`) from the first kind that has one. FIFO within a kind is the stream's order. A lease is the
 *   message's delivery: renewed with `working()` (+WPI), acknowledged with a double ack,
 *   released with `nak(delay)` (a redelivery keeps its place); one not renewed within the
 *   consumers' AckWait (= `leaseMs`) is redelivered to the next pull.
 * - **De-duplication**: a task is published with `Nats-Msg-Id` = request id, stage,
 *   generation and the request's creation time: the identity of the *transition* that made
 *   it. A publish repeated by a racing scheduler or by a repair is dropped; a legitimately
 *   new task of the same stage (a re-run after a lost input, a request id reused after its
 *   retention) has another generation or creation time and is not.
 * - **Requests**: a KV bucket, one key per request; updates are compare-and-set on the
 *   key's revision. The record's own `revision` counts its updates.
 * - **Order of effects**: KV has no transactions with streams, so an update writes the
 *   record first (the decision), then publishes the next task, then acknowledges the old
 *   one. A scheduler that dies between the steps leaves the old task unacknowledged: it is
 *   redelivered, found stale, and the lifecycle's repair publishes the current task (a
 *   repeat is de-duplicated) before dropping it. Admission publishes the first task before
 *   it creates the record; a task whose record is missing waits (see `repair`).
 * - **Announcements** are core NATS messages on `{ns}.chg` and `{ns}.q` (best effort; the
 *   dispatcher also polls).
 * - **Retention**: nats-server 2.9 has no per-message TTL. A finished record is deleted by
 *   the store that finished it when its `expiresAt` passes, and `read` ignores an expired
 *   one; as a backstop the bucket's age limit is `max(retentionMs, 24 h)` since a key's last
 *   write (so a request that waits unchanged longer than that is forgotten).
 */
export class JetStreamStore implements SchedulerStore {
  readonly backend = 'jetstream' as const;
  readonly durable = true;
  private readonly id = randomUUID();
  private readonly ns: string;
  private nc: NatsConnection | undefined;
  private js!: JetStreamClient;
  private jsm!: JetStreamManager;
  private kv!: KV;
  private subs: Subscription[] = [];
  /** KV revision of each record object read or written (the CAS handle). */
  private readonly kvRevision = new WeakMap<RequestRecord, number>();
  private readonly streams = new Set<string>();
  private readonly consumers = new Set<string>();
  private readonly held = new Map<string, Held>();
  private readonly drain = new DrainRate();
  private readonly waitingCache = new Map<string, number>();
  private readonly events = new StoreEvents();
  private readonly written = new WrittenRecords();
  private readonly expiryTimers = new Set<NodeJS.Timeout>();
  /** Per pool, the kinds of item last seen in its stream (see `lease`). */
  private readonly kinds = new Map<string, KindCache>();
  private arrivals = 0;
  private stopped = false;

  constructor(private readonly opts: JetStreamStoreOptions) {
    this.ns = (opts.namespace ?? 'diffmesh').replace(/[^A-Za-z0-9_-]/g, '_');
  }

  async start(): Promise<void> {
    if (this.nc) return;
    let nc: NatsConnection;
    // A credentials or TLS file that cannot be read is a config error, not an unreachable server.
    const secured = natsConnectionOptions({ credentialsFile: this.opts.credentialsFile, tls: this.opts.natsTls });
    try {
      nc = await connect({
        servers: this.opts.url,
        name: `diffmesh-scheduler-store-${this.id.slice(0, 8)}`,
        maxReconnectAttempts: -1,
        // Its own announcements are ignored on arrival anyway: the server need not send them back.
        noEcho: true,
        // No stack captured for every request (each KV get/update, publish and pull is one): a
        // store error names its cause without it (see `unreachable`), and it was ~9% of the store's CPU.
        noAsyncTraces: true,
        ...secured,
      });
    } catch (err) {
      throw unreachable(this.opts.url, err);
    }
    try {
      this.jsm = await nc.jetstreamManager();
      this.js = nc.jetstream();
      this.kv = await this.js.views.kv(`${this.ns}_requests`, { history: 1, ttl: Math.max(this.opts.retentionMs, MIN_BUCKET_AGE_MS) });
    } catch (err) {
      await nc.close().catch(() => undefined);
      throw new DiffmeshError(
        Code.UNAVAILABLE,
        'TRANSPORT',
        `NATS at ${this.opts.url} has no JetStream (start nats-server with -js): ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    this.nc = nc;
    this.subs.push(nc.subscribe(`${this.ns}.chg`, { callback: (_e, m) => this.changeMessage(dec.decode(m.data)) }));
    this.subs.push(nc.subscribe(`${this.ns}.q`, { callback: (_e, m) => this.queueMessage(dec.decode(m.data)) }));
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const t of this.expiryTimers) clearTimeout(t);
    this.expiryTimers.clear();
    for (const s of this.subs) s.unsubscribe();
    await this.nc?.drain().catch(() => undefined);
    this.nc = undefined;
  }

  private check(): void {
    if (!this.nc || this.stopped) throw storeStoppedError(this.backend);
  }

  // ---- requests --------------------------------------------------------------------------

  private key(reqId: string): string {
    return `r.${tok(reqId)}`;
  }

  async read(reqId: string): Promise<RequestRecord | undefined> {
    this.check();
    const e = await this.call(() => this.kv.get(this.key(reqId)));
    if (!e || e.operation !== 'PUT' || e.value.length === 0) return undefined;
    const rec = decodeRecord(dec.decode(e.value));
    if (rec.expiresAt > 0 && rec.expiresAt <= Date.now()) return undefined;
    this.kvRevision.set(rec, e.revision);
    return rec;
  }

  async admit(record: RequestRecord, first: QueueItem, maxLength: number): Promise<{ record: RequestRecord; created: boolean }> {
    this.check();
    const reqId = record.state.context.reqId;
    const existing = await this.read(reqId);
    if (existing) return { record: existing, created: false };
    const waiting = await this.countQueue(first.pool, first.queue);
    this.waitingCache.set(first.queue, waiting);
    if (waiting >= maxLength) throw queueFullError(first.queue, maxLength, this.drain.retryAfterMs(first.queue));
    setPosition(record, first, waiting);
    record.revision = 1;
    // The task first: a record without its task would wait forever, a task without its
    // record is dropped by the lifecycle after a grace period.
    await this.publish(first);
    try {
      const body = encodeRecord(record);
      const rev = await this.kv.create(this.key(reqId), enc.encode(body));
      this.kvRevision.set(record, rev);
      this.written.wrote(record, body);
    } catch (err) {
      const now = await this.read(reqId);
      if (now) return { record: now, created: false };
      throw unreachable(this.opts.url, err);
    }
    this.waitingCache.set(first.queue, waiting + 1);
    this.announce(record, [first.pool]);
    return { record, created: true };
  }

  async update(reqId: string, mutate: (record: RequestRecord) => Mutation, hint?: RequestRecord): Promise<RequestRecord | undefined> {
    this.check();
    const hintRev = hint ? this.kvRevision.get(hint) : undefined;
    let first: RequestRecord | undefined;
    if (hint && hintRev !== undefined) {
      first = this.written.copy(hint) ?? copyRecord(hint);
      this.kvRevision.set(first, hintRev);
    }
    const done = await casLoop(
      () => this.read(reqId),
      mutate,
      async (rec) => {
        // The compare-and-set is on the KV entry's revision (of the read or the hint).
        const kvRev = this.kvRevision.get(rec) as number;
        try {
          const body = encodeRecord(rec);
          this.kvRevision.set(rec, await this.kv.update(this.key(reqId), enc.encode(body), kvRev));
          this.written.wrote(rec, body);
          return 'written';
        } catch (err) {
          if (/wrong last sequence|key exists/i.test(String((err as Error).message))) return 'conflict';
          throw unreachable(this.opts.url, err);
        }
      },
      first,
    );
    if (!done) return undefined;
    const { record, effects } = done;
    const pools = await this.applyEffects(effects);
    if (record.expiresAt > 0) this.forgetAt(reqId, record.expiresAt);
    this.announce(record, pools);
    return record;
  }

  /** Deletes a finished record when its retention ends (the bucket's age limit is the backstop). */
  private forgetAt(reqId: string, at: number): void {
    const t = setTimeout(
      () => {
        this.expiryTimers.delete(t);
        if (this.stopped) return;
        void this.read(reqId)
          .then((rec) => (rec === undefined ? this.kv.delete(this.key(reqId)) : undefined))
          .catch(() => undefined);
      },
      Math.max(0, at - Date.now()) + 10,
    );
    t.unref();
    this.expiryTimers.add(t);
  }

  // ---- queues ----------------------------------------------------------------------------

  private streamOf(pool: string): string {
    return `${this.ns}_tasks_${pool.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 32)}_${hash(pool, 8)}`;
  }

  private poolSubject(pool: string): string {
    return `${this.ns}.t.${tok(pool)}`;
  }

  private async ensureStream(pool: string): Promise<string> {
    const name = this.streamOf(pool);
    if (this.streams.has(name)) return name;
    try {
      await this.jsm.streams.info(name);
    } catch (err) {
      if (!isNotFound(err)) throw unreachable(this.opts.url, err);
      try {
        await this.jsm.streams.add({
          name,
          subjects: [`${this.poolSubject(pool)}.>`],
          retention: RetentionPolicy.Workqueue,
          storage: StorageType.File,
          duplicate_window: nanos(this.opts.duplicateWindowMs ?? 10 * 60_000),
        });
      } catch (e) {
        // Another store made it meanwhile.
        await this.jsm.streams.info(name).catch(() => {
          throw unreachable(this.opts.url, e);
        });
      }
    }
    this.streams.add(name);
    return name;
  }

  private async publish(item: QueueItem): Promise<boolean> {
    await this.ensureStream(item.pool);
    this.arrivals = (this.arrivals + 1) % 1_000_000;
    const arrival = `${String(Date.now()).padStart(13, '0')}${String(this.arrivals).padStart(6, '0')}`;
    const subject = `${this.poolSubject(item.pool)}.${priorityKey(item.priority)}.${tok(item.queue)}.${tok(item.model)}.${tok(item.tenant ?? DEFAULT_TENANT)}.${arrival}.${tok(item.id)}`;
    const ack = await this.call(() =>
      this.js.publish(subject, enc.encode(encodeItem(item)), { msgID: `${item.id}#${item.gen}#${item.createdAt}` }),
    );
    const cache = this.kinds.get(item.pool);
    if (cache) addKind(cache.kinds, subject);
    return !ack.duplicate;
  }

  /** Items of `queue` in the stream (waiting or leased), from the subject counts. */
  private async countQueue(pool: string, queue: string): Promise<number> {
    let n = 0;
    for (const [subject, count] of await this.subjects(pool)) {
      if (untok(subject.split('.')[4] ?? '') === queue) n += count;
    }
    return n;
  }

  /** The pool stream's item subjects with their message counts (empty without a stream). */
  private async subjects(pool: string): Promise<Array<[string, number]>> {
    try {
      const info = await this.jsm.streams.info(this.streamOf(pool), { subjects_filter: `${this.poolSubject(pool)}.>` });
      return Object.entries(info.state.subjects ?? {});
    } catch (err) {
      if (isNotFound(err)) return [];
      throw unreachable(this.opts.url, err);
    }
  }

  private async ensureConsumer(stream: string, filter: string): Promise<string> {
    const name = `c_${hash(filter, 24)}`;
    const key = `${stream}/${name}`;
    if (this.consumers.has(key)) return name;
    try {
      await this.jsm.consumers.info(stream, name);
    } catch (err) {
      if (!isNotFound(err)) throw unreachable(this.opts.url, err);
      await this.jsm.consumers
        .add(stream, {
          durable_name: name,
          filter_subject: filter,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ack_wait: nanos(this.opts.leaseMs),
          max_deliver: -1,
          max_ack_pending: -1,
        })
        .catch(async (e: unknown) => {
          // Made by another store meanwhile.
          await this.jsm.consumers.info(stream, name).catch(() => {
            throw unreachable(this.opts.url, e);
          });
        });
    }
    this.consumers.add(key);
    return name;
  }

  async lease(query: LeaseQuery): Promise<Lease | undefined> {
    this.check();
    // The pool's subjects as last read, kept up to date with this store's own publishes and
    // read again when another store announces an item in the pool, when nothing cached can
    // be taken, or after a second.
    const cached = this.kinds.get(query.pool);
    const fresh = cached && Date.now() - cached.at < KINDS_TTL_MS ? cached : undefined;
    const found = await this.leaseFrom(query, fresh ?? (await this.readKinds(query.pool)));
    if (found || !fresh) return found;
    return this.leaseFrom(query, await this.readKinds(query.pool));
  }

  /** Reads a pool's item subjects and keeps them as its kinds (priority, queue, model) with their oldest arrival. */
  private async readKinds(pool: string): Promise<KindCache> {
    const kinds = new Map<string, Kind>();
    for (const [subject] of await this.subjects(pool)) addKind(kinds, subject);
    const cache = { at: Date.now(), kinds };
    this.kinds.set(pool, cache);
    return cache;
  }

  private async leaseFrom(query: LeaseQuery, cache: KindCache): Promise<Lease | undefined> {
    const stream = this.streamOf(query.pool);
    const candidates = [...cache.kinds.values()]
      .filter((k) => fitsAny(k, query.fits))
      .map((k) => ({ k, rank: tenantRank(query.tenants, k.tenant) }))
      // The tenant order first, then the priority token (smaller = larger priority), then the oldest arrival.
      .sort((a, b) => a.rank - b.rank || cmp(a.k.priority, b.k.priority) || cmp(a.k.arrivals[0], b.k.arrivals[0]))
      .map((x) => x.k);
    for (const k of candidates) {
      const durable = await this.ensureConsumer(stream, `${k.prefix}.*.*`);
      let msg: JsMsg;
      try {
        msg = await this.js.pull(stream, durable);
      } catch (err) {
        // 408 "requests pending": another store's pull on the kind is being answered (two schedulers at once).
        if (!isNotFound(err) && !/timeout|408/i.test(String((err as Error).message)) && (err as { code?: unknown }).code !== '408')
          throw unreachable(this.opts.url, err);
        // Nothing to take there now (all out on leases, or gone).
        cache.kinds.delete(k.prefix);
        continue;
      }
      takeKind(cache.kinds, msg.subject);
      const item = decodeItem(dec.decode(msg.data));
      const token = `${stream}|${msg.seq}|${msg.info.redeliveryCount}|${randomUUID().slice(0, 8)}`;
      this.held.set(token, { msg, stream, renewedAt: Date.now() });
      this.drain.out(item.queue);
      const waiting = this.waitingCache.get(item.queue);
      if (waiting) this.waitingCache.set(item.queue, waiting - 1);
      const record = this.written.forItem(item);
      return { item, token, deliveries: msg.info.redeliveryCount, ...(record ? { record } : {}) };
    }
    return undefined;
  }

  /** The held message of a lease that is still ours (renewed within `leaseMs`). */
  private ours(lease: Lease): Held | undefined {
    const h = this.held.get(lease.token);
    if (!h) return undefined;
    if (Date.now() - h.renewedAt > this.opts.leaseMs) {
      this.held.delete(lease.token);
      return undefined;
    }
    return h;
  }

  async renew(lease: Lease): Promise<boolean> {
    this.check();
    const h = this.ours(lease);
    if (!h) return false;
    // Removed (its request ended) while we held it?
    try {
      await this.jsm.streams.getMessage(h.stream, { seq: h.msg.seq });
    } catch (err) {
      if (isNotFound(err)) {
        this.held.delete(lease.token);
        return false;
      }
      throw unreachable(this.opts.url, err);
    }
    h.msg.working();
    h.renewedAt = Date.now();
    return true;
  }

  async apply(effects: QueueEffects): Promise<void> {
    this.check();
    const pools = await this.applyEffects(effects);
    for (const p of pools) this.notifyQueue(p, true);
  }

  /** Enqueue, then ack, release and remove: the next task exists before the old one goes. */
  private async applyEffects(effects: QueueEffects): Promise<string[]> {
    const pools: string[] = [];
    if (effects.enqueue && (await this.publish(effects.enqueue))) pools.push(effects.enqueue.pool);
    if (effects.ack) {
      const h = this.ours(effects.ack);
      if (h) {
        this.held.delete(effects.ack.token);
        // Not waited for: until it lands the message is still out on its lease (never given
        // to anyone else), and one that never lands is redelivered, found stale and dropped.
        h.msg.ackAck().catch(() => undefined);
      }
    }
    if (effects.release) {
      const { lease, delayMs } = effects.release;
      const h = this.ours(lease);
      if (h) {
        this.held.delete(lease.token);
        h.msg.nak(delayMs > 0 ? delayMs : undefined);
        // The server has it before this returns: a pull that follows gets the item back first.
        await this.nc?.flush().catch(() => undefined);
        const cache = this.kinds.get(lease.item.pool);
        if (cache) addKind(cache.kinds, h.msg.subject);
        pools.push(lease.item.pool);
        if (delayMs > 0) setTimeout(() => this.notifyQueue(lease.item.pool, true), delayMs).unref();
      }
    }
    if (effects.remove) {
      const { pool, id } = effects.remove;
      if (this.streams.has(this.streamOf(pool)) || (await this.subjects(pool)).length > 0) {
        // Both layouts: with the tenant token, and before it.
        for (const filter of [`${this.poolSubject(pool)}.*.*.*.*.*.${tok(id)}`, `${this.poolSubject(pool)}.*.*.*.*.${tok(id)}`]) {
          await this.call(() => this.jsm.streams.purge(this.streamOf(pool), { filter })).catch((err: unknown) => {
            if (!isNotFound(err)) throw err;
          });
        }
      }
    }
    return pools;
  }

  waiting(queue: string): number {
    return this.waitingCache.get(queue) ?? 0;
  }

  async queueSizes(): Promise<Record<string, number>> {
    this.check();
    const out: Record<string, number> = {};
    const prefix = `${this.ns}_tasks_`;
    const lister = this.jsm.streams.list();
    for await (const s of lister) {
      if (!s.config.name.startsWith(prefix)) continue;
      const subject = s.config.subjects?.[0] ?? '';
      const pool = untok(subject.split('.')[2] ?? '');
      let leased = 0;
      for await (const c of this.jsm.consumers.list(s.config.name)) leased += c.num_ack_pending;
      out[pool] = Math.max(0, s.state.messages - leased);
    }
    return out;
  }

  async queuedKinds(pool: string): Promise<QueuedKind[]> {
    this.check();
    const kinds = new Map<string, QueuedKind & { prefixes: Set<string> }>();
    for (const [subject, count] of await this.subjects(pool)) {
      const p = parseSubject(subject);
      if (!p) continue;
      const queue = untok(p.tokens[4]);
      const model = untok(p.tokens[5]);
      const key = `${queue}\u0000${model}`;
      const k = kinds.get(key) ?? { pool, queue, model, count: 0, prefixes: new Set<string>() };
      k.count += count;
      k.prefixes.add(p.prefix);
      kinds.set(key, k);
    }
    // The subject counts include leased items: take off what each kind's consumer has out.
    const stream = this.streamOf(pool);
    const out: QueuedKind[] = [];
    for (const k of kinds.values()) {
      let leased = 0;
      for (const prefix of k.prefixes) {
        const info = await this.jsm.consumers.info(stream, `c_${hash(`${prefix}.*.*`, 24)}`).catch(() => undefined);
        leased += info?.num_ack_pending ?? 0;
      }
      if (k.count - leased > 0) out.push({ pool, queue: k.queue, model: k.model, count: k.count - leased });
    }
    return out;
  }

  onChange(listener: (change: RecordChange) => void): () => void {
    return this.events.onChange(listener);
  }

  onQueue(listener: (pool: string) => void): () => void {
    return this.events.onQueue(listener);
  }

  // ---- announcements ---------------------------------------------------------------------

  /** A record written here: told in process (with the record), then to the other stores on `{ns}.chg`. */
  private announce(record: RequestRecord, pools: string[]): void {
    const change = changeOf(record);
    this.events.change(change);
    this.nc?.publish(`${this.ns}.chg`, enc.encode(`${this.id}|${change.revision}|${change.terminal ? 1 : 0}|${change.reqId}`));
    for (const p of pools) this.notifyQueue(p, true);
  }

  /** An item may be available in `pool`: told in process and, with `publish`, to the other stores on `{ns}.q`. */
  private notifyQueue(pool: string, publish: boolean): void {
    this.events.queue(pool);
    if (publish) this.nc?.publish(`${this.ns}.q`, enc.encode(`${this.id}|${pool}`));
  }

  private changeMessage(text: string): void {
    const [origin, rev, terminal, ...id] = text.split('|');
    if (origin === this.id) return;
    const change: RecordChange = { reqId: id.join('|'), revision: Number(rev), terminal: terminal === '1' };
    this.written.changed(change.reqId, change.revision);
    this.events.change(change);
  }

  private queueMessage(text: string): void {
    const bar = text.indexOf('|');
    if (bar === -1 || text.slice(0, bar) === this.id) return;
    const pool = text.slice(bar + 1);
    this.kinds.delete(pool);
    this.notifyQueue(pool, false);
  }

  /** Runs a call; a connection failure becomes UNAVAILABLE / TRANSPORT naming the server. */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof DiffmeshError) throw err;
      throw unreachable(this.opts.url, err);
    }
  }
}

function unreachable(url: string, err: unknown): DiffmeshError {
  const detail = err instanceof Error ? err.message : String(err);
  return new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `NATS JetStream at ${url}: ${detail}`, { cause: err, retryAfterMs: 1000 });
}
