import { createHash, randomBytes } from 'node:crypto';
import { crc32c } from '@node-rs/crc32';
import { Redis } from 'ioredis';
import { Code, DiffmeshError, invalidParameter, type ObjectRef } from '@diffmesh/core';
import type { RedisLocation } from './durable-location.js';
import {
  checkKeyChecksum,
  DurableStoreBase,
  idOf,
  objectExpired,
  objectNotFound,
  piecesOf,
  storedRef,
  ttlOf,
  type DurableReader,
  type DurableStoreCommonOptions,
} from './durable-store.js';
import { formatBytes } from './memory-store.js';
import { formatChecksum } from './tensor-service-client.js';
import type { ObjectInfo, ObjectKey, TensorStoreUsage } from './tensor-store.js';

/** Options of {@link RedisTensorStore}. */
export interface RedisTensorStoreOptions extends DurableStoreCommonOptions {
  location: RedisLocation;
  /** Bytes per value: an object is kept as keys of this size. Default 4 MiB. */
  chunkBytes?: number;
  /** How long an expired object is still reported as expired rather than unknown. Default 10 minutes. */
  tombstoneMs?: number;
  /** How long the bytes of a replaced or deleted object stay for readers that opened it. Default 10 s. */
  readGraceMs?: number;
  /** Connection timeout (ms). Default 5000. */
  connectTimeoutMs?: number;
}

export const DEFAULT_REDIS_CHUNK_BYTES = 4 * 1024 * 1024;

/** Chunk values fetched ahead of the one being read. */
const READ_AHEAD = 2;
/** Chunk writes in flight at once. */
const WRITES_IN_FLIGHT = 3;
/** How long a put's reservation holds capacity before it counts as abandoned. */
const RESERVATION_MS = 10 * 60_000;

interface Script {
  lua: string;
  sha: string;
}

function script(lua: string): Script {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

/** Releases version ARGV[v] (its reservation or object): counters at once, bytes after a grace. */
const RELEASE_FN = `
local function release(prefix, ver, n, grace)
  local vkey, skey, ukey = prefix .. ':v', prefix .. ':s', prefix .. ':u'
  if redis.call('ZREM', vkey, ver) == 1 then
    local sz = tonumber(redis.call('HGET', skey, ver) or '0')
    redis.call('HDEL', skey, ver)
    redis.call('DECRBY', ukey, sz)
  end
  for i = 0, n - 1 do redis.call('PEXPIRE', prefix .. ':d:' .. ver .. ':' .. i, grace) end
end
local function purge(prefix, now)
  local vkey, skey, ukey = prefix .. ':v', prefix .. ':s', prefix .. ':u'
  local gone = redis.call('ZRANGEBYSCORE', vkey, '-inf', now)
  local freed = 0
  for _, v in ipairs(gone) do
    freed = freed + tonumber(redis.call('HGET', skey, v) or '0')
    redis.call('HDEL', skey, v)
  end
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', vkey, '-inf', now)
    redis.call('DECRBY', ukey, freed)
  end
  return #gone
end
`;

/** ARGV: prefix, now, ver, size, capacity, deadline → {ok, used, live} */
const RESERVE = script(`${RELEASE_FN}
local prefix, now = ARGV[1], tonumber(ARGV[2])
purge(prefix, now)
local used = tonumber(redis.call('GET', prefix .. ':u') or '0')
local size, cap = tonumber(ARGV[4]), tonumber(ARGV[5])
if cap > 0 and used + size > cap then return {0, used, redis.call('ZCARD', prefix .. ':v')} end
redis.call('ZADD', prefix .. ':v', ARGV[6], ARGV[3])
redis.call('HSET', prefix .. ':s', ARGV[3], size)
redis.call('INCRBY', prefix .. ':u', size)
return {1, used + size, 0}
`);

/** KEYS: meta, request set. ARGV: prefix, ver, exp, ref, n, ttl, tombstone, id, grace → 1, or -1 when the reservation is gone */
const COMMIT = script(`${RELEASE_FN}
local prefix, ver, exp, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5])
if not redis.call('ZSCORE', prefix .. ':v', ver) then return -1 end
local old = redis.call('HMGET', KEYS[1], 'ver', 'n')
redis.call('HSET', KEYS[1], 'ref', ARGV[4], 'ver', ver, 'exp', exp, 'n', n, 'ttl', ARGV[6])
redis.call('PEXPIREAT', KEYS[1], exp + tonumber(ARGV[7]))
redis.call('ZADD', prefix .. ':v', exp, ver)
for i = 0, n - 1 do redis.call('PEXPIREAT', prefix .. ':d:' .. ver .. ':' .. i, exp) end
if old[1] and old[1] ~= ver then release(prefix, old[1], tonumber(old[2] or '0'), tonumber(ARGV[9])) end
redis.call('SADD', KEYS[2], ARGV[8])
if redis.call('PEXPIRETIME', KEYS[2]) < exp + tonumber(ARGV[7]) then redis.call('PEXPIREAT', KEYS[2], exp + tonumber(ARGV[7])) end
return 1
`);

/** KEYS: meta, request set. ARGV: prefix, id, now, grace → 1 deleted, 0 none */
const DELETE = script(`${RELEASE_FN}
local m = redis.call('HMGET', KEYS[1], 'ver', 'n', 'exp')
if not m[1] then return 0 end
release(ARGV[1], m[1], tonumber(m[2] or '0'), tonumber(ARGV[4]))
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
if tonumber(m[3]) <= tonumber(ARGV[3]) then return 0 end
return 1
`);

/** KEYS: meta, request set. ARGV: prefix, now, ttl (0 = keep), tombstone → {1, exp, ttl} | {0} unknown | {-1} expired */
const TOUCH = script(`
local m = redis.call('HMGET', KEYS[1], 'ver', 'n', 'exp', 'ttl')
if not m[1] then return {0} end
local now = tonumber(ARGV[2])
if tonumber(m[3]) <= now then return {-1} end
local ttl = tonumber(ARGV[3])
if ttl == 0 then ttl = tonumber(m[4]) end
local exp = now + ttl
redis.call('HSET', KEYS[1], 'exp', exp, 'ttl', ttl)
redis.call('PEXPIREAT', KEYS[1], exp + tonumber(ARGV[4]))
redis.call('ZADD', ARGV[1] .. ':v', exp, m[1])
for i = 0, tonumber(m[2]) - 1 do redis.call('PEXPIREAT', ARGV[1] .. ':d:' .. m[1] .. ':' .. i, exp) end
if redis.call('PEXPIRETIME', KEYS[2]) < exp + tonumber(ARGV[4]) then redis.call('PEXPIREAT', KEYS[2], exp + tonumber(ARGV[4])) end
return {1, exp, ttl}
`);

/** ARGV: prefix, ver, n, grace */
const ABORT = script(`${RELEASE_FN}
release(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1
`);

/** ARGV: prefix, now → {purged, used, live} */
const USAGE = script(`${RELEASE_FN}
local n = purge(ARGV[1], tonumber(ARGV[2]))
return {n, tonumber(redis.call('GET', ARGV[1] .. ':u') or '0'), redis.call('ZCARD', ARGV[1] .. ':v')}
`);

interface Meta {
  ref: ObjectRef;
  ver: string;
  expiresAt: number;
  chunks: number;
}

/**
 * A {@link DurableStore} in redis. An object is a hash of its ref and expiry
 * (`<prefix>:m:<id>`) and its bytes in values of `chunkBytes` (`<prefix>:d:<version>:<n>`),
 * each put a new version: a put writes its values first and publishes them with one script
 * that also retires the version it replaces, so readers never see a mix. Keys expire with the
 * object (redis deletes them itself); the hash stays `tombstoneMs` longer so that late readers
 * hear "expired". Capacity is counted in redis (`<prefix>:u`, reservations and live versions
 * in `<prefix>:v` by expiry), so every client of a prefix shares it; a server past its
 * `maxmemory` answers OOM, reported as STORE_FULL too. Standalone redis (or a sentinel's
 * primary): the scripts touch keys they compute, which redis cluster does not allow.
 */
export class RedisTensorStore extends DurableStoreBase {
  readonly kind = 'redis' as const;
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly chunkBytes: number;
  private readonly tombstoneMs: number;
  private readonly graceMs: number;

  constructor(private readonly opts: RedisTensorStoreOptions) {
    super(opts.location.uri, opts, 'redis');
    const loc = opts.location;
    this.prefix = loc.prefix;
    this.chunkBytes = opts.chunkBytes ?? DEFAULT_REDIS_CHUNK_BYTES;
    if (!Number.isSafeInteger(this.chunkBytes) || this.chunkBytes < 1024)
      throw new RangeError('redis store: chunkBytes must be at least 1024');
    this.tombstoneMs = opts.tombstoneMs ?? 10 * 60_000;
    this.graceMs = Math.max(1, opts.readGraceMs ?? 10_000);
    this.redis = new Redis({
      host: loc.host,
      port: loc.port,
      db: loc.db,
      ...(loc.username ? { username: loc.username } : {}),
      ...(loc.password ? { password: loc.password } : {}),
      ...(loc.tls ? { tls: {} } : {}),
      connectTimeout: opts.connectTimeoutMs ?? 5000,
      // Fail a command after a reconnect or two instead of queueing it for as long as redis is away.
      maxRetriesPerRequest: 2,
      retryStrategy: (times) => Math.min(times * 100, 2000),
      lazyConnect: false,
    });
    // Without a listener ioredis prints connection errors to the console; commands report them.
    this.redis.on('error', (err: Error) => this.opts.logger?.debug({ err: err.message, store: this.uri }, 'redis store: connection error'));
  }

  async write(ref: ObjectRef, data: Uint8Array | AsyncIterable<Uint8Array>, opts: { ttlMs?: number } = {}): Promise<ObjectInfo> {
    this.checkOpen();
    const id = ref.objectId;
    if (!id) throw invalidParameter('object_id', 'is required');
    const size = ref.sizeBytes;
    const ttlMs = ttlOf(opts.ttlMs || ref.ttlMs, this.defaultTtlMs);
    const ver = randomBytes(8).toString('hex');
    await this.reserve(ver, size, ref.name);
    let written = 0;
    let chunks = 0;
    let crc = 0;
    const inFlight = new Set<Promise<unknown>>();
    try {
      // Values expire with the reservation until the commit gives them the object's expiry.
      const reservedUntil = this.now() + RESERVATION_MS;
      for await (const piece of piecesOf(data, this.chunkBytes)) {
        if (written + piece.byteLength > size) throw invalidParameter('data', `more than header.size_bytes (${size}) bytes`);
        crc = crc32c(piece, crc);
        written += piece.byteLength;
        const key = this.dataKey(ver, chunks++);
        const p = this.redis.set(key, Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength), 'PXAT', reservedUntil);
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p)).catch(() => undefined);
        if (inFlight.size >= WRITES_IN_FLIGHT) await Promise.race(inFlight);
      }
      await Promise.all(inFlight);
      if (written !== size) throw invalidParameter('header.size_bytes', `the data ended after ${written} of ${size} bytes`);
      const checksum = formatChecksum(crc);
      if (ref.checksum && ref.checksum !== checksum) {
        throw new DiffmeshError(
          Code.INVALID_ARGUMENT,
          'CHECKSUM_MISMATCH',
          `header.checksum: the bytes do not match ${ref.checksum} (got ${checksum})`,
          {
            metadata: { field: 'header.checksum', object_id: id },
          },
        );
      }
      const stored = storedRef({ ...ref, checksum }, ttlMs, this.uri);
      const expiresAt = this.now() + ttlMs;
      const reqId = id.slice(0, Math.max(0, id.indexOf(':')));
      const ok = await this.run(
        COMMIT,
        [this.metaKey(id), this.requestKey(reqId)],
        [this.prefix, ver, expiresAt, JSON.stringify(stored), chunks, ttlMs, this.tombstoneMs, id, this.graceMs],
      );
      if (ok !== 1) {
        throw new DiffmeshError(
          Code.ABORTED,
          'INTERNAL',
          `object ${id}: the put took longer than its reservation (${RESERVATION_MS} ms); try again`,
          {
            metadata: { object_id: id },
          },
        );
      }
      return { ref: stored, expiresAt };
    } catch (err) {
      await Promise.allSettled(inFlight);
      await this.run(ABORT, [], [this.prefix, ver, chunks, 1]).catch(() => undefined);
      throw this.mapError(err, `put of ${id}`);
    }
  }

  async openRead(key: ObjectKey): Promise<DurableReader> {
    const meta = await this.live(key);
    return new RedisReader(
      this.redis,
      meta,
      (ver, n) => this.dataKey(ver, n),
      this.chunkBytes,
      (err) => this.mapError(err, `read of ${meta.ref.objectId}`),
    );
  }

  async delete(key: ObjectKey): Promise<boolean> {
    this.checkOpen();
    const id = idOf(key);
    try {
      const n = await this.run(DELETE, [this.metaKey(id), this.requestKey(requestOf(id))], [this.prefix, id, this.now(), this.graceMs]);
      return n === 1;
    } catch (err) {
      throw this.mapError(err, `delete of ${id}`);
    }
  }

  async deleteRequest(requestId: string): Promise<number> {
    this.checkOpen();
    let ids: string[];
    try {
      ids = await this.redis.smembers(this.requestKey(requestId));
    } catch (err) {
      throw this.mapError(err, `delete of request ${requestId}`);
    }
    let n = 0;
    for (const id of ids) if (await this.delete(id)) n += 1;
    return n;
  }

  async touch(key: ObjectKey, ttlMs?: number): Promise<ObjectInfo> {
    this.checkOpen();
    const id = idOf(key);
    const ttl = ttlMs === undefined || ttlMs === 0 ? 0 : ttlOf(ttlMs, this.defaultTtlMs);
    let res: unknown;
    try {
      res = await this.run(TOUCH, [this.metaKey(id), this.requestKey(requestOf(id))], [this.prefix, this.now(), ttl, this.tombstoneMs]);
    } catch (err) {
      throw this.mapError(err, `touch of ${id}`);
    }
    const [status, exp, newTtl] = (res as number[]).map(Number);
    if (status === 0) throw objectNotFound(id, this.uri);
    if (status === -1) throw objectExpired(id);
    const meta = await this.live(key);
    return { ref: { ...meta.ref, ttlMs: newTtl }, expiresAt: exp };
  }

  async usage(): Promise<TensorStoreUsage> {
    this.checkOpen();
    const [, used, live] = ((await this.run(USAGE, [], [this.prefix, this.now()])) as number[]).map(Number);
    return { objects: live, bytes: used, capacityBytes: this.capacityBytes };
  }

  /** Frees the capacity of expired objects (redis deletes their keys itself). */
  async sweep(): Promise<number> {
    if (this.closed) return 0;
    const [purged] = ((await this.run(USAGE, [], [this.prefix, this.now()])) as number[]).map(Number);
    return purged;
  }

  protected async closeClient(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  // ---- internals ----

  private async reserve(ver: string, size: number, name: string): Promise<void> {
    let res: number[];
    try {
      res = (
        (await this.run(RESERVE, [], [this.prefix, this.now(), ver, size, this.capacityBytes, this.now() + RESERVATION_MS])) as number[]
      ).map(Number);
    } catch (err) {
      throw this.mapError(err, `put of "${name}"`);
    }
    if (res[0] === 1) return;
    const what = `"${name}" (${formatBytes(size)})`;
    const metadata = { size_bytes: String(size), used_bytes: String(res[1]), capacity_bytes: String(this.capacityBytes) };
    if (size > this.capacityBytes) {
      throw new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `redis store ${this.uri} cannot hold ${what}: larger than its capacity of ${formatBytes(this.capacityBytes)}`,
        { metadata },
      );
    }
    throw new DiffmeshError(
      Code.RESOURCE_EXHAUSTED,
      'STORE_FULL',
      `redis store ${this.uri} full: cannot hold ${what}; ${formatBytes(res[1])} of ${formatBytes(this.capacityBytes)} in use by ${res[2]} objects`,
      { retryAfterMs: this.retryAfterMs, metadata },
    );
  }

  /** The meta of a live object; NOT_FOUND (OBJECT_EXPIRED past its TTL) otherwise. */
  protected async live(key: ObjectKey): Promise<Meta> {
    this.checkOpen();
    const id = idOf(key);
    let fields: (string | null)[];
    try {
      fields = await this.redis.hmget(this.metaKey(id), 'ref', 'ver', 'exp', 'n', 'ttl');
    } catch (err) {
      throw this.mapError(err, `read of ${id}`);
    }
    const [refJson, ver, exp, n, ttl] = fields;
    if (refJson === null || ver === null) throw objectNotFound(id, this.uri);
    const expiresAt = Number(exp);
    if (this.now() >= expiresAt) throw objectExpired(id);
    const ref = { ...(JSON.parse(refJson) as ObjectRef), ttlMs: Number(ttl), durableUri: this.uri };
    checkKeyChecksum(key, ref);
    return { ref, ver, expiresAt, chunks: Number(n) };
  }

  private async run(s: Script, keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await this.redis.evalsha(s.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!String((err as Error).message).startsWith('NOSCRIPT')) throw err;
      return this.redis.eval(s.lua, keys.length, ...keys, ...args);
    }
  }

  /** Redis failures as diffmesh errors: OOM = STORE_FULL; connection trouble = UNAVAILABLE. */
  private mapError(err: unknown, what: string): Error {
    if (err instanceof DiffmeshError) return err;
    const message = err instanceof Error ? err.message : String(err);
    if (message.startsWith('OOM')) {
      return new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `redis store ${this.uri} full (the server is past its maxmemory) during ${what}`,
        {
          retryAfterMs: this.retryAfterMs,
          cause: err,
        },
      );
    }
    if (this.closed) return new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'tensor store is closed', { cause: err });
    const replyError = (err as { name?: string }).name === 'ReplyError';
    return new DiffmeshError(
      replyError ? Code.INTERNAL : Code.UNAVAILABLE,
      replyError ? 'INTERNAL' : 'TRANSPORT',
      `redis store ${this.uri}: ${what} failed: ${message}`,
      { cause: err },
    );
  }

  private metaKey(id: string): string {
    return `${this.prefix}:m:${id}`;
  }

  private dataKey(ver: string, n: number): string {
    return `${this.prefix}:d:${ver}:${n}`;
  }

  private requestKey(requestId: string): string {
    return `${this.prefix}:r:${requestId}`;
  }
}

function requestOf(id: string): string {
  return id.slice(0, Math.max(0, id.indexOf(':')));
}

/** Reads one version's values, a few ahead of the one asked for. */
class RedisReader implements DurableReader {
  readonly ref: ObjectRef;
  readonly expiresAt: number;
  readonly preferredReadBytes: number;
  private readonly ahead = new Map<number, Promise<Buffer | null>>();

  constructor(
    private readonly redis: Redis,
    private readonly meta: Meta,
    private readonly key: (ver: string, n: number) => string,
    private readonly chunkBytes: number,
    private readonly mapError: (err: unknown) => Error,
  ) {
    this.ref = meta.ref;
    this.expiresAt = meta.expiresAt;
    this.preferredReadBytes = chunkBytes;
  }

  async readExactly(buf: Uint8Array, length: number, position: number): Promise<void> {
    for (let done = 0; done < length;) {
      const pos = position + done;
      const index = Math.floor(pos / this.chunkBytes);
      const within = pos - index * this.chunkBytes;
      const chunkLength = Math.min(this.chunkBytes, this.ref.sizeBytes - index * this.chunkBytes);
      const n = Math.min(length - done, chunkLength - within);
      let value: Buffer | null;
      try {
        if (within === 0 && n === chunkLength) {
          value = await this.chunk(index);
          for (let k = 1; k <= READ_AHEAD && index + k < this.meta.chunks; k++) void this.prefetch(index + k);
        } else {
          value = await this.redis.getrangeBuffer(this.key(this.meta.ver, index), within, within + n - 1);
        }
      } catch (err) {
        throw this.mapError(err);
      }
      if (value === null || value.byteLength < n) {
        throw new DiffmeshError(
          Code.NOT_FOUND,
          'OBJECT_NOT_FOUND',
          `object ${this.ref.objectId}: its bytes are gone (replaced, deleted or expired while being read)`,
          { metadata: { object_id: this.ref.objectId } },
        );
      }
      buf.set(value.subarray(0, n), done);
      done += n;
    }
  }

  private chunk(index: number): Promise<Buffer | null> {
    const p = this.ahead.get(index) ?? this.redis.getBuffer(this.key(this.meta.ver, index));
    this.ahead.delete(index);
    return p;
  }

  private prefetch(index: number): void {
    if (this.ahead.has(index)) return;
    const p = this.redis.getBuffer(this.key(this.meta.ver, index));
    p.catch(() => undefined);
    this.ahead.set(index, p);
  }

  async close(): Promise<void> {
    this.ahead.clear();
  }
}
