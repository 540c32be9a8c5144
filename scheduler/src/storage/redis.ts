import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Code, DiffmeshError, redactUri } from '@diffmesh/core';
import { copyRecord, decodeItem, decodeRecord, encodeItem, encodeRecord } from './codec.js';
import { StoreEvents, casLoop, priorityKey, setPosition } from './common.js';
import { DrainRate, queueFullError, storeStoppedError } from './queue-full.js';
import { WrittenRecords } from './written.js';
import {
  DEFAULT_TENANT,
  deadlineKey,
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

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions extends StoreOptions {
  /** `redis://host:port[/db]`. */
  url: string;
  /** Key prefix: stores with one prefix on one server share state. Default `diffmesh:`. */
  prefix?: string;
}

/**
 * Lua shared by the scripts. Keys (prefix P): `r:{reqId}` a record (hash: rev, status,
 * exp, body); `i:{itemId}` an item (hash: body, pool, queue, model, m = its order key,
 * vis = visible from, tok = lease token, until, dlv = deliveries, t = tenant, missing in
 * items stored before tenants: `default`); `pq:{pool}` and
 * `qq:{queue}` the waiting items in dispatch order (sorted sets of order keys, all scores 0,
 * ordered by the key itself: inverted priority, then arrival); `leased` the leased items by
 * expiry; `seq` the arrival counter; `pools` every pool seen.
 */
const LIB = `
local P = ARGV[1]
local function ins(e)
  local ik = P .. 'i:' .. e.id
  if redis.call('EXISTS', ik) == 1 then return 0 end
  local seq = redis.call('INCR', P .. 'seq')
  local m = e.pk .. string.format('%015d', seq) .. '|' .. e.id
  redis.call('HSET', ik, 'body', e.body, 'pool', e.pool, 'queue', e.queue, 'model', e.model, 'm', m, 'vis', 0, 'tok', '', 'until', 0, 'dlv', 0, 't', e.tenant)
  redis.call('ZADD', P .. 'pq:' .. e.pool, 0, m)
  redis.call('ZADD', P .. 'qq:' .. e.queue, 0, m)
  redis.call('SADD', P .. 'pools', e.pool)
  return 1
end
local function drop(id)
  local ik = P .. 'i:' .. id
  local f = redis.call('HMGET', ik, 'pool', 'queue', 'm')
  if not f[1] then return 0 end
  redis.call('ZREM', P .. 'pq:' .. f[1], f[3])
  redis.call('ZREM', P .. 'qq:' .. f[2], f[3])
  redis.call('ZREM', P .. 'leased', id)
  redis.call('DEL', ik)
  return 1
end
local function back(id, vis)
  local ik = P .. 'i:' .. id
  local f = redis.call('HMGET', ik, 'pool', 'queue', 'm')
  if not f[1] then return false end
  redis.call('HSET', ik, 'tok', '', 'until', 0, 'vis', vis)
  redis.call('ZREM', P .. 'leased', id)
  redis.call('ZADD', P .. 'pq:' .. f[1], 0, f[3])
  redis.call('ZADD', P .. 'qq:' .. f[2], 0, f[3])
  return f[1]
end
local function effects(fx, pools)
  if fx.ack and redis.call('HGET', P .. 'i:' .. fx.ack.id, 'tok') == fx.ack.tok then drop(fx.ack.id) end
  if fx.release and redis.call('HGET', P .. 'i:' .. fx.release.id, 'tok') == fx.release.tok then
    local p = back(fx.release.id, fx.release.vis)
    if p then table.insert(pools, p) end
  end
  if fx.remove then drop(fx.remove.id) end
  if fx.enqueue and ins(fx.enqueue) == 1 then table.insert(pools, fx.enqueue.pool) end
end
local function announce(origin, pools)
  for _, p in ipairs(pools) do redis.call('PUBLISH', P .. 'queue', origin .. '|' .. p) end
end
`;

/** What the admit script answers first: the queue was full, the request id was known, or the request was stored. */
const ADMITTED = { queueFull: -1, exists: 0, created: 1 } as const;

/** ARGV: P, reqId, body, status, exp, maxLength, item, origin → {created, waiting} | {exists, rev, body} | {queueFull, waiting}. */
const ADMIT = `${LIB}
local rk = P .. 'r:' .. ARGV[2]
if redis.call('EXISTS', rk) == 1 then
  local h = redis.call('HMGET', rk, 'rev', 'body')
  return {${ADMITTED.exists}, h[1], h[2]}
end
local e = cjson.decode(ARGV[7])
local n = redis.call('ZCARD', P .. 'qq:' .. e.queue)
if n >= tonumber(ARGV[6]) then return {${ADMITTED.queueFull}, n} end
redis.call('HSET', rk, 'rev', 1, 'status', ARGV[4], 'exp', ARGV[5], 'body', ARGV[3])
ins(e)
redis.call('PUBLISH', P .. 'changes', ARGV[8] .. '|1|0|' .. ARGV[2])
announce(ARGV[8], {e.pool})
return {${ADMITTED.created}, n}
`;

/** What the commit script answers instead of the new revision: the record is gone, or another change came first. */
const COMMITTED = { gone: -1, conflict: 0 } as const;

/** ARGV: P, reqId, expectedRev, body, status, exp, effects, origin, terminal → new rev | conflict | gone. */
const COMMIT = `${LIB}
local rk = P .. 'r:' .. ARGV[2]
local rev = redis.call('HGET', rk, 'rev')
if not rev then return ${COMMITTED.gone} end
if rev ~= ARGV[3] then return ${COMMITTED.conflict} end
local nrev = tonumber(rev) + 1
redis.call('HSET', rk, 'rev', nrev, 'status', ARGV[5], 'exp', ARGV[6], 'body', ARGV[4])
if tonumber(ARGV[6]) > 0 then redis.call('PEXPIREAT', rk, ARGV[6]) end
local pools = {}
effects(cjson.decode(ARGV[7]), pools)
redis.call('PUBLISH', P .. 'changes', ARGV[8] .. '|' .. nrev .. '|' .. ARGV[9] .. '|' .. ARGV[2])
announce(ARGV[8], pools)
return nrev
`;

/** ARGV: P, effects, origin. */
const APPLY = `${LIB}
local pools = {}
effects(cjson.decode(ARGV[2]), pools)
announce(ARGV[3], pools)
return #pools
`;

/**
 * ARGV: P, pool, now, leaseMs, token, fits, tenants → {body, deliveries} | false. The first
 * fitting item in order of the best-ranked tenant: a tenant not in `tenants` ranks first (the
 * first such item ends the walk), then the listed ones in order.
 */
const LEASE = `${LIB}
local now = tonumber(ARGV[3])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'leased', '-inf', now)) do back(id, 0) end
local fits = cjson.decode(ARGV[6])
local function fit(queue, model)
  for _, f in ipairs(fits) do
    local q = false
    for _, k in ipairs(f.queues) do if k == queue then q = true end end
    if q then
      if not f.models then return true end
      for _, k in ipairs(f.models) do if k == model then return true end end
    end
  end
  return false
end
local rank = {}
for i, t in ipairs(cjson.decode(ARGV[7])) do rank[t] = i end
local pq = P .. 'pq:' .. ARGV[2]
local best, bestRank = nil, math.huge
local start = 0
while bestRank > 0 do
  local ms = redis.call('ZRANGE', pq, start, start + 99)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    local id = string.sub(m, string.find(m, '|', 1, true) + 1)
    local ik = P .. 'i:' .. id
    local f = redis.call('HMGET', ik, 'queue', 'model', 'vis', 'body', 'dlv', 't')
    if tonumber(f[3]) <= now and fit(f[1], f[2]) then
      local r = rank[f[6] or 'default'] or 0
      if r < bestRank then
        best = {m = m, id = id, ik = ik, f = f}
        bestRank = r
        if r == 0 then break end
      end
    end
  end
  start = start + 100
end
if not best then return false end
local until_ = now + tonumber(ARGV[4])
local dlv = tonumber(best.f[5]) + 1
redis.call('ZREM', pq, best.m)
redis.call('ZREM', P .. 'qq:' .. best.f[1], best.m)
redis.call('HSET', best.ik, 'tok', ARGV[5], 'until', until_, 'dlv', dlv)
redis.call('ZADD', P .. 'leased', until_, best.id)
return {best.f[4], dlv}
`;

/** ARGV: P, id, token, until → 1 | 0. */
const RENEW = `
local P = ARGV[1]
local ik = P .. 'i:' .. ARGV[2]
if redis.call('HGET', ik, 'tok') ~= ARGV[3] then return 0 end
redis.call('HSET', ik, 'until', ARGV[4])
redis.call('ZADD', P .. 'leased', ARGV[4], ARGV[2])
return 1
`;

type Scripts = {
  dmAdmit(...args: Array<string | number>): Promise<[number, string | number, string?]>;
  dmCommit(...args: Array<string | number>): Promise<number>;
  dmApply(...args: Array<string | number>): Promise<number>;
  dmLease(...args: Array<string | number>): Promise<[string, number] | null>;
  dmRenew(...args: Array<string | number>): Promise<number>;
};

/**
 * The shared store on Redis: several schedulers on any nodes share one server (or one key
 * prefix of it). Every change is one Lua script, so a record's compare-and-set and its queue
 * effects are atomic; leases are a sorted set by expiry, and an expired lease returns its
 * item to its place at the next lease call. Changes are announced on two pub/sub channels.
 * Finished records expire with Redis' own key expiry (`PEXPIREAT`).
 */
export class RedisStore implements SchedulerStore {
  readonly backend = 'redis' as const;
  readonly durable = true;
  private readonly id = randomUUID();
  private readonly prefix: string;
  private client: (Redis & Scripts) | undefined;
  private sub: Redis | undefined;
  private readonly drain = new DrainRate();
  private readonly waitingCache = new Map<string, number>();
  private readonly events = new StoreEvents();
  private readonly written = new WrittenRecords();
  private stopped = false;

  constructor(private readonly opts: RedisStoreOptions) {
    this.prefix = opts.prefix ?? 'diffmesh:';
  }

  async start(): Promise<void> {
    if (this.client) return;
    const options = {
      lazyConnect: true,
      maxRetriesPerRequest: 3,
      enableOfflineQueue: true,
      connectionName: `diffmesh-scheduler-${this.id.slice(0, 8)}`,
    };
    const client = new Redis(this.opts.url, options) as Redis & Scripts;
    client.defineCommand('dmAdmit', { numberOfKeys: 0, lua: ADMIT });
    client.defineCommand('dmCommit', { numberOfKeys: 0, lua: COMMIT });
    client.defineCommand('dmApply', { numberOfKeys: 0, lua: APPLY });
    client.defineCommand('dmLease', { numberOfKeys: 0, lua: LEASE });
    client.defineCommand('dmRenew', { numberOfKeys: 0, lua: RENEW });
    // Errors surface on the calls; an 'error' event without a listener would end the process.
    client.on('error', () => undefined);
    const sub = new Redis(this.opts.url, options);
    sub.on('error', () => undefined);
    try {
      await client.connect();
      await sub.connect();
      await sub.subscribe(`${this.prefix}changes`, `${this.prefix}queue`);
    } catch (err) {
      client.disconnect();
      sub.disconnect();
      throw unreachable(this.opts.url, err);
    }
    sub.on('message', (channel: string, message: string) => this.message(channel, message));
    this.client = client;
    this.sub = sub;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const { client, sub } = this;
    this.client = undefined;
    this.sub = undefined;
    await Promise.all([client?.quit().catch(() => client.disconnect()), sub?.quit().catch(() => sub.disconnect())]);
  }

  private get conn(): Redis & Scripts {
    if (!this.client || this.stopped) throw storeStoppedError(this.backend);
    return this.client;
  }

  async read(reqId: string): Promise<RequestRecord | undefined> {
    const [rev, body, exp] = await this.call(() => this.conn.hmget(`${this.prefix}r:${reqId}`, 'rev', 'body', 'exp'));
    if (!body || !rev) return undefined;
    if (Number(exp) > 0 && Number(exp) <= Date.now()) return undefined;
    const rec = decodeRecord(body);
    rec.revision = Number(rev);
    return rec;
  }

  async admit(record: RequestRecord, first: QueueItem, maxLength: number): Promise<{ record: RequestRecord; created: boolean }> {
    const reqId = record.state.context.reqId;
    setPosition(record, first, this.waiting(first.queue));
    record.revision = 1;
    const body = encodeRecord(record);
    const res = await this.call(() =>
      this.conn.dmAdmit(
        this.prefix,
        reqId,
        body,
        record.state.context.status,
        record.expiresAt,
        maxLength,
        JSON.stringify(this.itemArg(first)),
        this.id,
      ),
    );
    const [code, a, b] = res;
    if (code === ADMITTED.queueFull) {
      this.waitingCache.set(first.queue, Number(a));
      throw queueFullError(first.queue, maxLength, this.drain.retryAfterMs(first.queue));
    }
    if (code === ADMITTED.exists) {
      const existing = decodeRecord(String(b));
      existing.revision = Number(a);
      return { record: existing, created: false };
    }
    this.waitingCache.set(first.queue, Number(a) + 1);
    this.written.wrote(record, body);
    this.events.announce(record, [first.pool]);
    return { record, created: true };
  }

  async update(reqId: string, mutate: (record: RequestRecord) => Mutation, hint?: RequestRecord): Promise<RequestRecord | undefined> {
    const done = await casLoop(
      () => this.read(reqId),
      mutate,
      async (rec, effects, expected) => {
        const body = encodeRecord(rec);
        const res = await this.call(() =>
          this.conn.dmCommit(
            this.prefix,
            reqId,
            String(expected),
            body,
            rec.state.context.status,
            rec.expiresAt,
            JSON.stringify(this.effectsArg(effects)),
            this.id,
            isTerminalStatus(rec.state.context.status) ? 1 : 0,
          ),
        );
        if (res !== -1 && res !== 0) this.written.wrote(rec, body);
        return res === COMMITTED.gone ? 'gone' : res === COMMITTED.conflict ? 'conflict' : 'written';
      },
      hint ? (this.written.copy(hint) ?? copyRecord(hint)) : undefined,
    );
    if (!done) return undefined;
    const { record, effects } = done;
    this.events.announce(record, effects.enqueue ? [effects.enqueue.pool] : []);
    if (effects.release) this.events.later(effects.release.lease.item.pool, effects.release.delayMs);
    return record;
  }

  async lease(query: LeaseQuery): Promise<Lease | undefined> {
    const token = randomUUID();
    const fits = query.fits.map((f) => ({ queues: [...f.queues], ...(f.models ? { models: [...f.models] } : {}) }));
    const res = await this.call(() =>
      this.conn.dmLease(
        this.prefix,
        query.pool,
        Date.now(),
        this.opts.leaseMs,
        token,
        JSON.stringify(fits),
        JSON.stringify(query.tenants ?? []),
      ),
    );
    if (!res) return undefined;
    const item = decodeItem(res[0]);
    this.drain.out(item.queue);
    const cached = this.waitingCache.get(item.queue);
    if (cached) this.waitingCache.set(item.queue, cached - 1);
    const record = this.written.forItem(item);
    return { item, token, deliveries: Number(res[1]), ...(record ? { record } : {}) };
  }

  async renew(lease: Lease): Promise<boolean> {
    const res = await this.call(() => this.conn.dmRenew(this.prefix, lease.item.id, lease.token, Date.now() + this.opts.leaseMs));
    return res === 1;
  }

  async apply(effects: QueueEffects): Promise<void> {
    await this.call(() => this.conn.dmApply(this.prefix, JSON.stringify(this.effectsArg(effects)), this.id));
    const pools = [...(effects.enqueue ? [effects.enqueue.pool] : []), ...(effects.release ? [effects.release.lease.item.pool] : [])];
    for (const p of pools) this.events.queue(p);
    if (effects.release) this.events.later(effects.release.lease.item.pool, effects.release.delayMs);
  }

  waiting(queue: string): number {
    return this.waitingCache.get(queue) ?? 0;
  }

  async queueSizes(): Promise<Record<string, number>> {
    const conn = this.conn;
    const pools = await this.call(() => conn.smembers(`${this.prefix}pools`));
    const counts = await Promise.all(pools.map((p) => this.call(() => conn.zcard(`${this.prefix}pq:${p}`))));
    const out: Record<string, number> = {};
    pools.forEach((p, i) => (out[p] = counts[i]));
    return out;
  }

  async queuedKinds(pool: string): Promise<QueuedKind[]> {
    const conn = this.conn;
    const members = await this.call(() => conn.zrange(`${this.prefix}pq:${pool}`, 0, -1));
    const kinds = new Map<string, QueuedKind>();
    const fields = await Promise.all(
      members.map((m) => this.call(() => conn.hmget(`${this.prefix}i:${m.slice(m.indexOf('|') + 1)}`, 'queue', 'model'))),
    );
    for (const [queue, model] of fields) {
      if (queue === null || model === null) continue;
      const key = `${queue}\u0000${model}`;
      const k = kinds.get(key);
      if (k) k.count += 1;
      else kinds.set(key, { pool, queue, model, count: 1 });
    }
    return [...kinds.values()];
  }

  onChange(listener: (change: RecordChange) => void): () => void {
    return this.events.onChange(listener);
  }

  onQueue(listener: (pool: string) => void): () => void {
    return this.events.onQueue(listener);
  }

  // ---- internals -------------------------------------------------------------------------

  private itemArg(item: QueueItem): Record<string, string> {
    return {
      id: item.id,
      pool: item.pool,
      queue: item.queue,
      model: item.model,
      tenant: item.tenant ?? DEFAULT_TENANT,
      // Earliest deadline first within a priority.
      pk: priorityKey(item.priority) + deadlineKey(item.deadline),
      body: encodeItem(item),
    };
  }

  private effectsArg(effects: QueueEffects): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    if (effects.ack) out.ack = { id: effects.ack.item.id, tok: effects.ack.token };
    if (effects.release)
      out.release = { id: effects.release.lease.item.id, tok: effects.release.lease.token, vis: Date.now() + effects.release.delayMs };
    if (effects.remove) out.remove = { id: effects.remove.id };
    if (effects.enqueue) out.enqueue = this.itemArg(effects.enqueue);
    return out;
  }

  /** Runs a command; a connection failure becomes UNAVAILABLE / TRANSPORT naming the server. */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof DiffmeshError) throw err;
      throw unreachable(this.opts.url, err);
    }
  }

  /** A change another store announced (its own are announced in process, with the record). */
  private message(channel: string, message: string): void {
    const bar = message.indexOf('|');
    if (bar === -1 || message.slice(0, bar) === this.id) return;
    const rest = message.slice(bar + 1);
    if (channel === `${this.prefix}queue`) {
      this.events.queue(rest);
      return;
    }
    const [rev, terminal, ...id] = rest.split('|');
    const change: RecordChange = { reqId: id.join('|'), revision: Number(rev), terminal: terminal === '1' };
    this.written.changed(change.reqId, change.revision);
    this.events.change(change);
  }
}

function unreachable(url: string, err: unknown): DiffmeshError {
  const detail = err instanceof Error ? err.message : String(err);
  return new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `redis at ${redactUri(url)} cannot be reached: ${detail}`, {
    cause: err,
    retryAfterMs: 1000,
  });
}
