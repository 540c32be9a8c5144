import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { decodeItem, decodeRecord, encodeItem, encodeRecord } from './codec.js';
import { StoreEvents, fitsAny, setPosition } from './common.js';
import { DrainRate, queueFullError, storeStoppedError } from './queue-full.js';
import {
  DEFAULT_TENANT,
  isTerminalStatus,
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

/** Options of {@link SqliteStore}. */
export interface SqliteStoreOptions extends StoreOptions {
  /** Database file; its folder is created. Several processes of one node may share it. */
  file: string;
  /** How often other processes' changes are looked for (ms). Default 50. */
  pollMs?: number;
}

interface ItemRow {
  id: string;
  pool: string;
  queue: string;
  model: string;
  body: string;
  lease_token: string | null;
  deliveries: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS requests (
  req_id TEXT PRIMARY KEY,
  revision INTEGER NOT NULL,
  status TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  change_seq INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_change ON requests(change_seq);
CREATE INDEX IF NOT EXISTS requests_expiry ON requests(expires_at) WHERE expires_at > 0;
CREATE TABLE IF NOT EXISTS items (
  id TEXT PRIMARY KEY,
  pool TEXT NOT NULL,
  queue TEXT NOT NULL,
  model TEXT NOT NULL,
  priority INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  visible_at INTEGER NOT NULL DEFAULT 0,
  lease_token TEXT,
  lease_until INTEGER NOT NULL DEFAULT 0,
  deliveries INTEGER NOT NULL DEFAULT 0,
  change_seq INTEGER NOT NULL,
  body TEXT NOT NULL,
  tenant TEXT NOT NULL DEFAULT 'default'
);
CREATE INDEX IF NOT EXISTS items_order ON items(pool, priority DESC, seq);
CREATE INDEX IF NOT EXISTS items_queue ON items(queue, lease_token);
CREATE INDEX IF NOT EXISTS items_change ON items(change_seq);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters(name, value) VALUES ('seq', 0);
`;

/**
 * The single-node durable store: one SQLite file (WAL mode) holds request records and
 * queue items, so a scheduler that restarts finds every accepted request where it was.
 * Every change is one immediate transaction: a record's compare-and-set and its queue
 * effects commit together. Several processes on the node may share the file (a second
 * scheduler, `diffmesh status`); they see each other's changes by polling SQLite's
 * `data_version` every `pollMs`.
 */
export class SqliteStore implements SchedulerStore {
  readonly backend = 'sqlite' as const;
  readonly durable = true;
  private db: Database.Database | undefined;
  private stmts!: ReturnType<SqliteStore['prepare']>;
  /** Lease queries ordering this many tenants (prepared once per count). */
  private readonly byTenants = new Map<number, Database.Statement>();
  private readonly drain = new DrainRate();
  private readonly events = new StoreEvents();
  private poller: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private dataVersion = 0;
  private lastChange = 0;
  private stopped = false;

  constructor(private readonly opts: SqliteStoreOptions) {}

  start(): Promise<void> {
    if (this.db) return Promise.resolve();
    mkdirSync(path.dirname(path.resolve(this.opts.file)), { recursive: true });
    const db = new Database(this.opts.file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    db.exec(SCHEMA);
    // Files made before tenants existed: their items belong to the default tenant.
    if (!(db.pragma('table_info(items)') as Array<{ name: string }>).some((c) => c.name === 'tenant')) {
      db.exec(`ALTER TABLE items ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'`);
    }
    this.db = db;
    this.stmts = this.prepare(db);
    this.dataVersion = db.pragma('data_version', { simple: true }) as number;
    this.lastChange = (this.stmts.counter.get() as { value: number }).value;
    this.poller = setInterval(() => this.poll(), this.opts.pollMs ?? 50);
    this.poller.unref();
    this.sweeper = setInterval(() => this.sweep(), Math.min(1000, Math.max(50, Math.floor(this.opts.retentionMs / 2))));
    this.sweeper.unref();
    return Promise.resolve();
  }

  stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poller);
    clearInterval(this.sweeper);
    this.db?.close();
    this.db = undefined;
    this.byTenants.clear();
    return Promise.resolve();
  }

  private prepare(db: Database.Database) {
    return {
      counter: db.prepare(`SELECT value FROM counters WHERE name = 'seq'`),
      bump: db.prepare(`UPDATE counters SET value = value + 1 WHERE name = 'seq' RETURNING value`),
      read: db.prepare(`SELECT body, revision, expires_at FROM requests WHERE req_id = ?`),
      exists: db.prepare(`SELECT 1 FROM requests WHERE req_id = ?`),
      insertRecord: db.prepare(
        `INSERT INTO requests(req_id, revision, status, expires_at, change_seq, body) VALUES (@reqId, @revision, @status, @expiresAt, @seq, @body)`,
      ),
      writeRecord: db.prepare(
        `UPDATE requests SET revision = @revision, status = @status, expires_at = @expiresAt, change_seq = @seq, body = @body WHERE req_id = @reqId`,
      ),
      waiting: db.prepare(`SELECT COUNT(*) AS n FROM items WHERE queue = ? AND lease_token IS NULL`),
      insertItem: db.prepare(
        `INSERT OR IGNORE INTO items(id, pool, queue, model, priority, seq, change_seq, body, tenant) VALUES (@id, @pool, @queue, @model, @priority, @seq, @seq, @body, @tenant)`,
      ),
      ack: db.prepare(`DELETE FROM items WHERE id = ? AND lease_token = ?`),
      release: db.prepare(
        `UPDATE items SET lease_token = NULL, lease_until = 0, visible_at = @visibleAt, change_seq = @seq WHERE id = @id AND lease_token = @token`,
      ),
      remove: db.prepare(`DELETE FROM items WHERE id = ?`),
      anyExpired: db.prepare(`SELECT 1 FROM items WHERE pool = ? AND lease_token IS NOT NULL AND lease_until <= ? LIMIT 1`),
      expireLeases: db.prepare(
        `UPDATE items SET lease_token = NULL, lease_until = 0, change_seq = @seq WHERE pool = @pool AND lease_token IS NOT NULL AND lease_until <= @now`,
      ),
      candidates: db.prepare(
        `SELECT id, pool, queue, model, body, lease_token, deliveries FROM items WHERE pool = ? AND lease_token IS NULL AND visible_at <= ? ORDER BY priority DESC, COALESCE(json_extract(body, '$.deadline'), 9999999999999) ASC, seq ASC`,
      ),
      take: db.prepare(`UPDATE items SET lease_token = @token, lease_until = @until, deliveries = deliveries + 1 WHERE id = @id`),
      renew: db.prepare(`UPDATE items SET lease_until = @until WHERE id = @id AND lease_token = @token`),
      sizes: db.prepare(`SELECT pool, COUNT(*) AS n FROM items WHERE lease_token IS NULL GROUP BY pool`),
      kinds: db.prepare(`SELECT queue, model, COUNT(*) AS n FROM items WHERE pool = ? AND lease_token IS NULL GROUP BY queue, model`),
      changedRecords: db.prepare(`SELECT req_id, revision, status, change_seq FROM requests WHERE change_seq > ?`),
      changedPools: db.prepare(`SELECT DISTINCT pool FROM items WHERE change_seq > ? AND lease_token IS NULL`),
      maxChange: db.prepare(`SELECT MAX(change_seq) AS m FROM (SELECT change_seq FROM requests UNION ALL SELECT change_seq FROM items)`),
      sweepExpired: db.prepare(`DELETE FROM requests WHERE expires_at > 0 AND expires_at <= ?`),
      sweepBeyond: db.prepare(
        `DELETE FROM requests WHERE req_id IN (SELECT req_id FROM requests WHERE expires_at > 0 ORDER BY expires_at DESC LIMIT -1 OFFSET ?)`,
      ),
    };
  }

  /**
   * The waiting items of a pool in lease order: with `tenants`, a tenant not listed first, then
   * the listed ones in order (see `LeaseQuery.tenants`); then priority, then earliest deadline
   * (read from the item's body: no column, so older files need no migration), then arrival.
   */
  private candidates(tenants: readonly string[] | undefined): Database.Statement {
    const n = tenants?.length ?? 0;
    if (n === 0) return this.stmts.candidates;
    let stmt = this.byTenants.get(n);
    if (!stmt) {
      const rank = Array.from({ length: n }, (_, i) => `WHEN ? THEN ${i + 1}`).join(' ');
      stmt = this.conn.prepare(
        `SELECT id, pool, queue, model, body, lease_token, deliveries FROM items WHERE pool = ? AND lease_token IS NULL AND visible_at <= ? ` +
          `ORDER BY CASE tenant ${rank} ELSE 0 END, priority DESC, COALESCE(json_extract(body, '$.deadline'), 9999999999999) ASC, seq ASC`,
      );
      this.byTenants.set(n, stmt);
    }
    return stmt;
  }

  private check(): void {
    if (!this.db || this.stopped) throw storeStoppedError(this.backend);
  }

  private get conn(): Database.Database {
    if (!this.db || this.stopped) throw storeStoppedError(this.backend);
    return this.db;
  }

  private nextSeq(): number {
    return (this.stmts.bump.get() as { value: number }).value;
  }

  read(reqId: string): Promise<RequestRecord | undefined> {
    try {
      this.check();
      return Promise.resolve(this.readNow(reqId));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private readNow(reqId: string): RequestRecord | undefined {
    const row = this.stmts.read.get(reqId) as { body: string; revision: number; expires_at: number } | undefined;
    if (!row || (row.expires_at > 0 && row.expires_at <= Date.now())) return undefined;
    const rec = decodeRecord(row.body);
    rec.revision = row.revision;
    return rec;
  }

  admit(record: RequestRecord, first: QueueItem, maxLength: number): Promise<{ record: RequestRecord; created: boolean }> {
    try {
      const db = this.conn;
      const reqId = record.state.context.reqId;
      const result = db
        .transaction(() => {
          const existing = this.readNow(reqId);
          if (existing) return { record: existing, created: false };
          const waiting = (this.stmts.waiting.get(first.queue) as { n: number }).n;
          if (waiting >= maxLength) throw queueFullError(first.queue, maxLength, this.drain.retryAfterMs(first.queue));
          // Expired but not yet swept: the id is free again.
          if (this.stmts.exists.get(reqId)) db.prepare(`DELETE FROM requests WHERE req_id = ?`).run(reqId);
          setPosition(record, first, waiting);
          record.revision = 1;
          const seq = this.nextSeq();
          this.stmts.insertRecord.run({
            reqId,
            revision: 1,
            status: record.state.context.status,
            expiresAt: record.expiresAt,
            seq,
            body: encodeRecord(record),
          });
          this.insertItem(first);
          return { record, created: true };
        })
        .immediate();
      if (result.created) this.events.announce(result.record, [first.pool]);
      return Promise.resolve(result);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  update(reqId: string, mutate: (record: RequestRecord) => Mutation): Promise<RequestRecord | undefined> {
    try {
      const db = this.conn;
      const pools: string[] = [];
      const rec = db
        .transaction(() => {
          const r = this.readNow(reqId);
          if (!r) return undefined;
          const effects = mutate(r);
          if (effects === false) return undefined;
          r.revision += 1;
          const seq = this.nextSeq();
          this.stmts.writeRecord.run({
            reqId,
            revision: r.revision,
            status: r.state.context.status,
            expiresAt: r.expiresAt,
            seq,
            body: encodeRecord(r),
          });
          this.applyEffects(effects, seq, pools);
          return r;
        })
        .immediate();
      if (rec) this.events.announce(rec, pools);
      return Promise.resolve(rec);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  lease(query: LeaseQuery): Promise<Lease | undefined> {
    try {
      const db = this.conn;
      const now = Date.now();
      const lease = db
        .transaction((): Lease | undefined => {
          if (this.stmts.anyExpired.get(query.pool, now)) this.stmts.expireLeases.run({ pool: query.pool, now, seq: this.nextSeq() });
          for (const row of this.candidates(query.tenants).all(query.pool, now, ...(query.tenants ?? [])) as ItemRow[]) {
            if (!fitsAny(row, query.fits)) continue;
            const token = randomUUID();
            this.stmts.take.run({ token, until: now + this.opts.leaseMs, id: row.id });
            return { item: decodeItem(row.body), token, deliveries: row.deliveries + 1 };
          }
          return undefined;
        })
        .immediate();
      if (lease) this.drain.out(lease.item.queue);
      return Promise.resolve(lease);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  renew(lease: Lease): Promise<boolean> {
    try {
      this.check();
      const r = this.stmts.renew.run({ until: Date.now() + this.opts.leaseMs, id: lease.item.id, token: lease.token });
      return Promise.resolve(r.changes === 1);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  apply(effects: QueueEffects): Promise<void> {
    try {
      const db = this.conn;
      const pools: string[] = [];
      db.transaction(() => this.applyEffects(effects, this.nextSeq(), pools)).immediate();
      for (const p of pools) this.events.queue(p);
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  waiting(queue: string): number {
    if (!this.db) return 0;
    return (this.stmts.waiting.get(queue) as { n: number }).n;
  }

  queueSizes(): Promise<Record<string, number>> {
    try {
      this.check();
      const out: Record<string, number> = {};
      for (const row of this.stmts.sizes.all() as Array<{ pool: string; n: number }>) out[row.pool] = row.n;
      return Promise.resolve(out);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  queuedKinds(pool: string): Promise<QueuedKind[]> {
    try {
      this.check();
      const rows = this.stmts.kinds.all(pool) as Array<{ queue: string; model: string; n: number }>;
      return Promise.resolve(rows.map((r) => ({ pool, queue: r.queue, model: r.model, count: r.n })));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  onChange(listener: (change: RecordChange) => void): () => void {
    return this.events.onChange(listener);
  }

  onQueue(listener: (pool: string) => void): () => void {
    return this.events.onQueue(listener);
  }

  // ---- internals -------------------------------------------------------------------------

  private insertItem(item: QueueItem): boolean {
    const seq = this.nextSeq();
    const r = this.stmts.insertItem.run({
      id: item.id,
      pool: item.pool,
      queue: item.queue,
      model: item.model,
      priority: item.priority,
      seq,
      body: encodeItem(item),
      tenant: item.tenant ?? DEFAULT_TENANT,
    });
    return r.changes === 1;
  }

  /** Applies queue effects inside a transaction: ack, release, remove, then enqueue. */
  private applyEffects(effects: QueueEffects, seq: number, pools: string[]): void {
    if (effects.ack) this.stmts.ack.run(effects.ack.item.id, effects.ack.token);
    if (effects.release) {
      const { lease, delayMs } = effects.release;
      const r = this.stmts.release.run({ visibleAt: Date.now() + delayMs, seq, id: lease.item.id, token: lease.token });
      if (r.changes === 1) {
        pools.push(lease.item.pool);
        this.events.later(lease.item.pool, delayMs);
      }
    }
    if (effects.remove) this.stmts.remove.run(effects.remove.id);
    if (effects.enqueue && this.insertItem(effects.enqueue)) pools.push(effects.enqueue.pool);
  }

  /** Announces what other processes changed since the last look. */
  private poll(): void {
    const db = this.db;
    if (!db || this.stopped) return;
    try {
      const version = db.pragma('data_version', { simple: true }) as number;
      if (version === this.dataVersion) return;
      this.dataVersion = version;
      const since = this.lastChange;
      let max = since;
      for (const row of this.stmts.changedRecords.all(since) as Array<{
        req_id: string;
        revision: number;
        status: string;
        change_seq: number;
      }>) {
        max = Math.max(max, row.change_seq);
        this.events.change({ reqId: row.req_id, revision: row.revision, terminal: isTerminalStatus(row.status) });
      }
      for (const row of this.stmts.changedPools.all(since) as Array<{ pool: string }>) this.events.queue(row.pool);
      const m = (this.stmts.maxChange.get() as { m: number | null }).m ?? max;
      this.lastChange = Math.max(max, m);
    } catch {
      // Busy or closing: the next poll looks again.
    }
  }

  /** Forgets finished requests past their retention, and the oldest beyond `maxRetained`. */
  private sweep(): void {
    const db = this.db;
    if (!db || this.stopped) return;
    try {
      this.stmts.sweepExpired.run(Date.now());
      this.stmts.sweepBeyond.run(this.opts.maxRetained);
    } catch {
      // Busy: the next sweep does it.
    }
  }
}
