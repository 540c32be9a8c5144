import { randomBytes } from 'node:crypto';
import { crc32c } from '@node-rs/crc32';
import { Code, DiffmeshError, invalidParameter, type Logger, type ObjectRef } from '@diffmesh/core';
import type { DurableKind } from './durable-location.js';
import { checkPutInput, rangeOf } from './tensor-bytes.js';
import { formatChecksum } from './tensor-service-client.js';
import type {
  GetOptions,
  ObjectInfo,
  ObjectKey,
  PutOptions,
  PutTensorInput,
  StoredTensor,
  TensorStore,
  TensorStoreUsage,
} from './tensor-store.js';

/**
 * A {@link TensorStore} in a store that outlives any node: redis or an S3-compatible bucket.
 * Stages may put into one directly (refs then name no owner), and a tensor-svc writes objects
 * through to one under the ids it assigned ({@link write}) or keeps its objects there. Every
 * ref it returns carries `durableUri` = {@link uri}.
 */
export interface DurableStore extends TensorStore {
  readonly kind: DurableKind;
  /** Credential-free URI of the store, written into refs as `durableUri`. */
  readonly uri: string;
  /**
   * Stores bytes under `ref.objectId`, replacing any object of that id once every byte has
   * arrived. `data` is the whole object or its bytes in order (a file being streamed); they
   * must add up to `ref.sizeBytes` and match `ref.checksum` (when set), else nothing is stored
   * (INVALID_ARGUMENT). The object expires `ttlMs` after the write (0 = `ref.ttlMs`, then the
   * store's default). Returns the stored object's ref and expiry.
   */
  write(ref: ObjectRef, data: Uint8Array | AsyncIterable<Uint8Array>, opts?: { ttlMs?: number }): Promise<ObjectInfo>;
  /** Opens an object to read ranges of it without holding it whole. */
  openRead(key: ObjectKey): Promise<DurableReader>;
  /** Deletes what expired (and frees its capacity); returns how many objects. */
  sweep(): Promise<number>;
}

/** An object opened by {@link DurableStore.openRead}. */
export interface DurableReader {
  readonly ref: ObjectRef;
  readonly expiresAt: number;
  /** Piece size that costs the store one request: read in these for speed. */
  readonly preferredReadBytes: number;
  /**
   * Fills `buf[0, length)` from `position` of the object (sequential reads are cheapest).
   * DATA_LOSS when the object's bytes end early; NOT_FOUND when it was replaced or deleted
   * long enough ago that its old bytes are gone.
   */
  readExactly(buf: Uint8Array, length: number, position: number): Promise<void>;
  close(): Promise<void>;
}

/** Settings every durable store shares. */
export interface DurableStoreCommonOptions {
  /** TTL of objects put without one (ms). Default 10 minutes. */
  defaultTtlMs?: number;
  /** Most bytes kept (0 = no limit of diffmesh's own; the server's still applies). Default 0. */
  capacityBytes?: number;
  /** Retry-After suggested with STORE_FULL. Default 1000 ms. */
  retryAfterMs?: number;
  /** How often {@link DurableStore.sweep} runs in the background (0 = never). Default 0. */
  sweepIntervalMs?: number;
  logger?: Logger;
  /** Clock of expiries. Default `Date.now`. */
  now?: () => number;
}

export const DEFAULT_DURABLE_TTL_MS = 10 * 60_000;

/** A new object id `{requestId}:{name}:{12 hex}`. */
export function newObjectId(input: Pick<PutTensorInput, 'requestId' | 'name'>): string {
  return `${input.requestId}:${input.name}:${randomBytes(6).toString('hex')}`;
}

/** The TTL a put asks for (0 / absent = `defaultTtlMs`); INVALID_ARGUMENT naming `ttl_ms` otherwise. */
export function ttlOf(ttlMs: number | undefined, defaultTtlMs: number): number {
  if (ttlMs === undefined || ttlMs === 0) return defaultTtlMs;
  if (!Number.isSafeInteger(ttlMs) || ttlMs < 0 || ttlMs > 0xffffffff) {
    throw invalidParameter('ttl_ms', `must be a non-negative integer number of milliseconds, got ${ttlMs}`);
  }
  return ttlMs;
}

/** The ref of a new object put straight into a durable store (no owner: the store is its home). */
export function refForPut(input: PutTensorInput, opts: PutOptions, defaultTtlMs: number, uri: string, now: number): ObjectRef {
  checkPutInput(input);
  return {
    objectId: newObjectId(input),
    ownerAddress: '',
    ownerNodeId: '',
    shape: [...input.shape],
    dtype: input.dtype,
    sizeBytes: input.data.byteLength,
    createdAt: now,
    name: input.name,
    ttlMs: ttlOf(opts.ttlMs, defaultTtlMs),
    checksum: formatChecksum(crc32c(input.data)),
    durableUri: uri,
  };
}

export function idOf(key: ObjectKey): string {
  return typeof key === 'string' ? key : key.objectId;
}

export function objectNotFound(id: string, where: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', `object ${id} not found in ${where}`, { metadata: { object_id: id } });
}

export function objectExpired(id: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'OBJECT_EXPIRED', `object ${id} expired (its TTL passed)`, { metadata: { object_id: id } });
}

export function checksumMismatch(id: string, expected: string, actual: string, what: string): DiffmeshError {
  return new DiffmeshError(
    Code.DATA_LOSS,
    'CHECKSUM_MISMATCH',
    `object ${id}: ${what} do not match their checksum (expected ${expected}, got ${actual})`,
    { metadata: { object_id: id } },
  );
}

/** A caller's ref must name the stored version (same checksum), as with every store. */
export function checkKeyChecksum(key: ObjectKey, stored: ObjectRef): void {
  if (typeof key !== 'string' && key.checksum !== '' && key.checksum !== stored.checksum) {
    throw new DiffmeshError(
      Code.DATA_LOSS,
      'CHECKSUM_MISMATCH',
      `object ${stored.objectId}: the ref's checksum ${key.checksum} does not match the stored ${stored.checksum}`,
      { metadata: { object_id: stored.objectId } },
    );
  }
}

/** A ref as stored: the caller's fields, the store's URI. Inline bytes never go into a store. */
export function storedRef(ref: ObjectRef, ttlMs: number, uri: string): ObjectRef {
  const { inlineData: _inline, ...rest } = ref;
  return { ...rest, shape: [...ref.shape], ttlMs, durableUri: uri };
}

/**
 * Reads `[offset, offset+length)` of an open object and checks the whole object's checksum:
 * bytes inside the range land in the result directly, the others pass through a scratch
 * buffer into the checksum only.
 */
export async function readRange(reader: DurableReader, opts: GetOptions = {}): Promise<Uint8Array> {
  const { ref } = reader;
  const size = ref.sizeBytes;
  const [start, end] = rangeOf(ref.objectId, size, opts);
  const out = Buffer.allocUnsafe(end - start);
  const piece = Math.max(64 * 1024, reader.preferredReadBytes);
  let scratch: Buffer | undefined;
  let crc = 0;
  for (let pos = 0; pos < size;) {
    // Pieces never straddle the range's edges, so each lands either in `out` or in `scratch`.
    const limit = pos < start ? start : pos < end ? end : size;
    const n = Math.min(piece - (pos % piece), limit - pos);
    const inRange = pos >= start && pos < end;
    const buf = inRange ? out.subarray(pos - start, pos - start + n) : (scratch ??= Buffer.allocUnsafe(piece)).subarray(0, n);
    await reader.readExactly(buf, n, pos);
    crc = crc32c(buf, crc);
    pos += n;
  }
  const actual = formatChecksum(crc);
  if (ref.checksum !== '' && actual !== ref.checksum) throw checksumMismatch(ref.objectId, ref.checksum, actual, 'stored bytes');
  return out;
}

/** The bytes of `data` in pieces of at most `pieceBytes`, whether it is whole or already in pieces. */
export async function* piecesOf(data: Uint8Array | AsyncIterable<Uint8Array>, pieceBytes: number): AsyncGenerator<Uint8Array> {
  if (data instanceof Uint8Array) {
    for (let pos = 0; pos < data.byteLength; pos += pieceBytes) yield data.subarray(pos, Math.min(data.byteLength, pos + pieceBytes));
    return;
  }
  let buf = Buffer.allocUnsafe(pieceBytes);
  let filled = 0;
  for await (const chunk of data) {
    for (let pos = 0; pos < chunk.byteLength;) {
      const n = Math.min(pieceBytes - filled, chunk.byteLength - pos);
      buf.set(chunk.subarray(pos, pos + n), filled);
      filled += n;
      pos += n;
      if (filled === pieceBytes) {
        yield buf;
        // The consumer may still hold the piece it was given (a write in flight).
        buf = Buffer.allocUnsafe(pieceBytes);
        filled = 0;
      }
    }
  }
  if (filled > 0) yield buf.subarray(0, filled);
}

/**
 * What the redis and S3 stores share: the common settings with their defaults, `put`, `get`
 * and `stat` in terms of {@link write}, {@link openRead} and the store's own `live` lookup,
 * the background sweep, and refusing calls once closed.
 */
export abstract class DurableStoreBase implements DurableStore {
  abstract readonly kind: DurableKind;
  readonly uri: string;
  protected readonly defaultTtlMs: number;
  protected readonly capacityBytes: number;
  protected readonly retryAfterMs: number;
  protected readonly now: () => number;
  protected closed = false;
  private readonly timer: NodeJS.Timeout | undefined;

  protected constructor(uri: string, common: DurableStoreCommonOptions, kind: DurableKind) {
    this.uri = uri;
    this.defaultTtlMs = common.defaultTtlMs ?? DEFAULT_DURABLE_TTL_MS;
    this.capacityBytes = common.capacityBytes ?? 0;
    this.retryAfterMs = common.retryAfterMs ?? 1000;
    this.now = common.now ?? Date.now;
    if (common.sweepIntervalMs && common.sweepIntervalMs > 0) {
      this.timer = setInterval(() => {
        this.sweep().catch((err: unknown) => common.logger?.warn({ err, store: this.uri }, `${kind} store: sweep failed`));
      }, common.sweepIntervalMs);
      this.timer.unref();
    }
  }

  abstract write(ref: ObjectRef, data: Uint8Array | AsyncIterable<Uint8Array>, opts?: { ttlMs?: number }): Promise<ObjectInfo>;
  abstract openRead(key: ObjectKey): Promise<DurableReader>;
  abstract sweep(): Promise<number>;
  abstract delete(key: ObjectKey): Promise<boolean>;
  abstract deleteRequest(requestId: string): Promise<number>;
  abstract touch(key: ObjectKey, ttlMs?: number): Promise<ObjectInfo>;
  abstract usage(): Promise<TensorStoreUsage>;
  /** The ref and expiry of a live object; NOT_FOUND (OBJECT_EXPIRED past its TTL) otherwise. */
  protected abstract live(key: ObjectKey): Promise<ObjectInfo>;
  /** Closes the store's client connection. */
  protected abstract closeClient(): Promise<void>;

  async put(input: PutTensorInput, opts: PutOptions = {}): Promise<ObjectRef> {
    this.checkOpen();
    const ref = refForPut(input, opts, this.defaultTtlMs, this.uri, this.now());
    return (await this.write(ref, input.data)).ref;
  }

  async get(key: ObjectKey, opts: GetOptions = {}): Promise<StoredTensor> {
    const reader = await this.openRead(key);
    try {
      return { ref: reader.ref, data: await readRange(reader, opts) };
    } finally {
      await reader.close();
    }
  }

  async stat(key: ObjectKey): Promise<ObjectInfo> {
    const meta = await this.live(key);
    return { ref: meta.ref, expiresAt: meta.expiresAt };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.closeClient();
  }

  protected checkOpen(): void {
    if (this.closed) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'tensor store is closed');
  }
}
