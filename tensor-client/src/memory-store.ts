import { randomBytes } from 'node:crypto';
import { type ObjectRef, Code, DiffmeshError, invalidParameter, type Logger } from '@diffmesh/core';
import { checkPutInput, checksumOf, rangeOf } from './tensor-bytes.js';
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

/** Options of {@link MemoryTensorStore}. */
export interface MemoryTensorStoreOptions {
  /** Most bytes held at once. */
  capacityBytes: number;
  /** TTL of objects put without one, in milliseconds. */
  defaultTtlMs: number;
  /** How often expired objects are dropped; 0 = only on access and on demand. Default 10 s. */
  sweepIntervalMs?: number;
  /** `retryAfterMs` suggested on `STORE_FULL`. Default 1000. */
  retryAfterMs?: number;
  /** Written into refs as `ownerNodeId`. Default `local`. */
  nodeId?: string;
  /** Written into refs as `ownerAddress`; `''` for the in-process store. */
  address?: string;
  /** Verify checksums on every `get`. Default true. */
  verifyOnGet?: boolean;
  /** Clock, for tests. Default `Date.now`. */
  now?: () => number;
  logger?: Logger;
}

/** How many expired ids are remembered so that late readers hear "expired", not "not found". */
const EXPIRED_MEMORY = 10_000;

interface Entry {
  ref: ObjectRef;
  data: Uint8Array;
  requestId: string;
  expiresAt: number;
}

/**
 * In-memory {@link TensorStore}: a map of objects plus a per-request index, a byte budget
 * and TTLs enforced on access and by an `unref()`ed sweep timer.
 */
export class MemoryTensorStore implements TensorStore {
  private readonly objects = new Map<string, Entry>();
  private readonly byRequest = new Map<string, Set<string>>();
  private readonly expired = new Map<string, number>();
  private readonly capacityBytes: number;
  private readonly defaultTtlMs: number;
  private readonly retryAfterMs: number;
  private readonly nodeId: string;
  private readonly address: string;
  private readonly verifyOnGet: boolean;
  private readonly now: () => number;
  private readonly logger: Logger | undefined;
  private readonly timer: NodeJS.Timeout | undefined;
  private usedBytes = 0;
  private closed = false;

  constructor(opts: MemoryTensorStoreOptions) {
    if (!Number.isSafeInteger(opts.capacityBytes) || opts.capacityBytes <= 0) {
      throw new RangeError(`tensor store: capacityBytes must be a positive integer, got ${opts.capacityBytes}`);
    }
    if (!Number.isSafeInteger(opts.defaultTtlMs) || opts.defaultTtlMs <= 0) {
      throw new RangeError(`tensor store: defaultTtlMs must be a positive integer, got ${opts.defaultTtlMs}`);
    }
    this.capacityBytes = opts.capacityBytes;
    this.defaultTtlMs = opts.defaultTtlMs;
    this.retryAfterMs = opts.retryAfterMs ?? 1000;
    this.nodeId = opts.nodeId ?? 'local';
    this.address = opts.address ?? '';
    this.verifyOnGet = opts.verifyOnGet ?? true;
    this.now = opts.now ?? Date.now;
    this.logger = opts.logger;
    const interval = opts.sweepIntervalMs ?? 10_000;
    if (interval > 0) {
      this.timer = setInterval(() => this.sweep(), interval);
      this.timer.unref();
    }
  }

  async put(input: PutTensorInput, opts: PutOptions = {}): Promise<ObjectRef> {
    this.checkOpen();
    checkPutInput(input);
    const ttlMs = this.ttlOf(opts.ttlMs);
    const size = input.data.byteLength;
    this.reserve(size, input);

    const now = this.now();
    let objectId: string;
    do objectId = `${input.requestId}:${input.name}:${randomBytes(6).toString('hex')}`;
    while (this.objects.has(objectId));
    const ref: ObjectRef = {
      objectId,
      ownerAddress: this.address,
      ownerNodeId: this.nodeId,
      shape: [...input.shape],
      dtype: input.dtype,
      sizeBytes: size,
      createdAt: now,
      name: input.name,
      ttlMs,
      checksum: checksumOf(input.data),
    };
    this.objects.set(objectId, { ref, data: input.data, requestId: input.requestId, expiresAt: now + ttlMs });
    let ids = this.byRequest.get(input.requestId);
    if (!ids) this.byRequest.set(input.requestId, (ids = new Set()));
    ids.add(objectId);
    this.usedBytes += size;
    return copyRef(ref);
  }

  async get(key: ObjectKey, range: GetOptions = {}): Promise<StoredTensor> {
    const entry = this.live(key);
    const [start, end] = rangeOf(entry.ref.objectId, entry.data.byteLength, range);
    if (this.verifyOnGet) {
      const actual = checksumOf(entry.data);
      if (actual !== entry.ref.checksum) {
        throw new DiffmeshError(
          Code.DATA_LOSS,
          'CHECKSUM_MISMATCH',
          `object ${entry.ref.objectId}: bytes do not match their checksum (expected ${entry.ref.checksum}, got ${actual})`,
          { metadata: { object_id: entry.ref.objectId } },
        );
      }
    }
    const data = start === 0 && end === entry.data.byteLength ? entry.data : entry.data.subarray(start, end);
    return { ref: copyRef(entry.ref), data };
  }

  async stat(key: ObjectKey): Promise<ObjectInfo> {
    const entry = this.live(key);
    return { ref: copyRef(entry.ref), expiresAt: entry.expiresAt };
  }

  async delete(key: ObjectKey): Promise<boolean> {
    this.checkOpen();
    const id = idOf(key);
    const entry = this.objects.get(id);
    if (!entry) return false;
    this.drop(entry);
    return true;
  }

  async deleteRequest(requestId: string): Promise<number> {
    this.checkOpen();
    const ids = this.byRequest.get(requestId);
    if (!ids) return 0;
    let n = 0;
    for (const id of [...ids]) {
      const entry = this.objects.get(id);
      if (entry) {
        this.drop(entry);
        n++;
      }
    }
    return n;
  }

  async touch(key: ObjectKey, ttlMs?: number): Promise<ObjectInfo> {
    const entry = this.live(key);
    if (ttlMs !== undefined) entry.ref.ttlMs = this.ttlOf(ttlMs);
    entry.expiresAt = this.now() + entry.ref.ttlMs;
    return { ref: copyRef(entry.ref), expiresAt: entry.expiresAt };
  }

  async usage(): Promise<TensorStoreUsage> {
    return { objects: this.objects.size, bytes: this.usedBytes, capacityBytes: this.capacityBytes };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.objects.clear();
    this.byRequest.clear();
    this.expired.clear();
    this.usedBytes = 0;
  }

  /** Drops every expired object now; returns how many. The sweep timer calls this. */
  sweep(): number {
    if (this.closed) return 0;
    const now = this.now();
    let n = 0;
    let bytes = 0;
    for (const entry of this.objects.values()) {
      if (now >= entry.expiresAt) {
        bytes += entry.ref.sizeBytes;
        this.expire(entry);
        n++;
      }
    }
    if (n > 0) this.logger?.debug({ objects: n, bytes }, 'tensor store: dropped expired objects');
    return n;
  }

  private ttlOf(ttlMs: number | undefined): number {
    if (ttlMs === undefined || ttlMs === 0) return this.defaultTtlMs;
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 0) {
      throw invalidParameter('ttl_ms', `must be a non-negative integer number of milliseconds, got ${ttlMs}`);
    }
    return ttlMs;
  }

  /** Makes room for `size` bytes or throws STORE_FULL. */
  private reserve(size: number, input: PutTensorInput): void {
    const what = `"${input.name}" (${formatBytes(size)}) for request ${input.requestId}`;
    if (size > this.capacityBytes) {
      throw new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `tensor store cannot hold ${what}: larger than its whole capacity of ${formatBytes(this.capacityBytes)}`,
        { metadata: { size_bytes: String(size), capacity_bytes: String(this.capacityBytes) } },
      );
    }
    if (this.usedBytes + size > this.capacityBytes) this.sweep();
    if (this.usedBytes + size > this.capacityBytes) {
      throw new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `tensor store full: cannot hold ${what}; ${formatBytes(this.usedBytes)} of ${formatBytes(this.capacityBytes)} in use by ${this.objects.size} objects`,
        {
          retryAfterMs: this.retryAfterMs,
          metadata: { size_bytes: String(size), used_bytes: String(this.usedBytes), capacity_bytes: String(this.capacityBytes) },
        },
      );
    }
  }

  /** The entry for a key if it exists and has not expired; throws NOT_FOUND otherwise. */
  private live(key: ObjectKey): Entry {
    this.checkOpen();
    const id = idOf(key);
    const entry = this.objects.get(id);
    if (!entry) {
      if (this.expired.has(id)) throw expiredError(id);
      throw new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', `object ${id} not found`, { metadata: { object_id: id } });
    }
    if (this.now() >= entry.expiresAt) {
      this.expire(entry);
      throw expiredError(id);
    }
    if (typeof key !== 'string' && key.checksum !== '' && key.checksum !== entry.ref.checksum) {
      throw new DiffmeshError(
        Code.DATA_LOSS,
        'CHECKSUM_MISMATCH',
        `object ${id}: the ref's checksum ${key.checksum} does not match the stored ${entry.ref.checksum}`,
        { metadata: { object_id: id } },
      );
    }
    return entry;
  }

  private expire(entry: Entry): void {
    this.drop(entry);
    this.expired.set(entry.ref.objectId, this.now());
    if (this.expired.size > EXPIRED_MEMORY) {
      const oldest = this.expired.keys().next();
      if (!oldest.done) this.expired.delete(oldest.value);
    }
  }

  private drop(entry: Entry): void {
    const id = entry.ref.objectId;
    if (!this.objects.delete(id)) return;
    this.usedBytes -= entry.ref.sizeBytes;
    const ids = this.byRequest.get(entry.requestId);
    if (ids) {
      ids.delete(id);
      if (ids.size === 0) this.byRequest.delete(entry.requestId);
    }
  }

  private checkOpen(): void {
    if (this.closed) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'tensor store is closed');
  }
}

function idOf(key: ObjectKey): string {
  return typeof key === 'string' ? key : key.objectId;
}

function copyRef(ref: ObjectRef): ObjectRef {
  return { ...ref, shape: [...ref.shape] };
}

function expiredError(id: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'OBJECT_EXPIRED', `object ${id} expired (its TTL passed)`, {
    metadata: { object_id: id },
  });
}

/** `12.0 MiB`-style sizes for messages. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}
