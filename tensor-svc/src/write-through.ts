/**
 * Write-through: objects of the node-local store copied to a durable store (redis or S3) as
 * they are put, so that they outlive the node. Which objects is a policy of the deployment:
 * every object, a request's final results only, or none, each within a size range.
 */
import { Code, DiffmeshError, asDiffmeshError, type Logger, type ObjectRef } from '@diffmesh/core';
import type { DurableStore } from '@diffmesh/tensor-client';
import type { ObjectHeader } from './object-header.js';
import type { ObjectSource, ObjectStore, ObjectWriter, StoredObjectInfo, StoreUsage } from './object-store.js';
import type { TieredStore } from './store.js';

/** Which objects are written through: all, a request's final results (PutHeader.final_result) only, or none. */
export const WRITE_THROUGH_MODES = ['all', 'final', 'none'] as const;
export type WriteThroughMode = (typeof WRITE_THROUGH_MODES)[number];

/** The write-through policy of a deployment. */
export interface WriteThroughPolicy {
  mode: WriteThroughMode;
  /** Objects smaller than this stay local only. */
  minBytes: number;
  /** Objects larger than this stay local only (0 = no limit). */
  maxBytes: number;
}

/** Whether an object with this header is written through under `policy`. */
export function writesThrough(policy: WriteThroughPolicy, header: Pick<ObjectHeader, 'sizeBytes' | 'finalResult'>): boolean {
  if (policy.mode === 'none') return false;
  if (policy.mode === 'final' && !header.finalResult) return false;
  if (header.sizeBytes < policy.minBytes) return false;
  return policy.maxBytes === 0 || header.sizeBytes <= policy.maxBytes;
}

/** Options of {@link WriteThroughStore}. */
export interface WriteThroughStoreOptions {
  local: TieredStore;
  durable: DurableStore;
  policy: WriteThroughPolicy;
  log: Logger;
  /** Bytes per read when an object is copied from its file. */
  chunkBytes: number;
}

/**
 * The node-local store with write-through to a durable store. A put that the policy selects
 * is stored locally, then copied to the durable store before it is answered (its ref then
 * carries `durableUri`); when the copy fails, the put fails and the local object is deleted,
 * so a ref with `durableUri` always has its copy. Reads are local; an object the local store
 * does not have (this service restarted without its directories) is read from the durable
 * store. Deletes and touches reach both.
 */
export class WriteThroughStore implements ObjectStore {
  private durableUsage: StoreUsage['durable'];

  constructor(private readonly opts: WriteThroughStoreOptions) {}

  get shmDir(): string {
    return this.opts.local.shmDir;
  }

  async beginPut(header: ObjectHeader): Promise<ObjectWriter> {
    const h = this.mark(header);
    const writer = await this.opts.local.beginPut(h);
    if (!h.durableUri) return writer;
    return {
      get bytesReceived() {
        return writer.bytesReceived;
      },
      write: (offset, data) => writer.write(offset, data),
      abort: () => writer.abort(),
      commit: async () => this.copyFromFile(await writer.commit()),
    };
  }

  async putWhole(header: ObjectHeader, data: Uint8Array): Promise<ObjectRef> {
    const h = this.mark(header);
    const ref = await this.opts.local.putWhole(h, data);
    if (h.durableUri) await this.copy(ref, data);
    return ref;
  }

  async adopt(header: ObjectHeader, fileName: string): Promise<ObjectRef> {
    const h = this.mark(header);
    const ref = await this.opts.local.adopt(h, fileName);
    return h.durableUri ? this.copyFromFile(ref) : ref;
  }

  async openRead(objectId: string, checksum = ''): Promise<ObjectSource> {
    try {
      return await this.opts.local.openRead(objectId, checksum);
    } catch (err) {
      if (!isUnknown(err)) throw err;
      const source = await this.opts.durable
        .openRead(checksum ? keyWithChecksum(objectId, checksum) : objectId)
        .catch((second: unknown) => {
          throw preferLocal(err, second);
        });
      this.opts.log.info(
        { objectId, store: this.opts.durable.uri },
        'tensor store: serving an object this node does not hold from its durable copy',
      );
      return source;
    }
  }

  async stat(objectId: string): Promise<StoredObjectInfo> {
    try {
      return this.opts.local.stat(objectId);
    } catch (err) {
      if (!isUnknown(err)) throw err;
      const info = await this.opts.durable.stat(objectId).catch((second: unknown) => {
        throw preferLocal(err, second);
      });
      return { ...info, tier: 'durable' };
    }
  }

  async touch(objectId: string, ttlMs = 0): Promise<StoredObjectInfo> {
    let info: StoredObjectInfo;
    try {
      info = await this.opts.local.touch(objectId, ttlMs);
    } catch (err) {
      if (!isUnknown(err)) throw err;
      const d = await this.opts.durable.touch(objectId, ttlMs || undefined).catch((second: unknown) => {
        throw preferLocal(err, second);
      });
      return { ...d, tier: 'durable' };
    }
    if (info.ref.durableUri) {
      await this.opts.durable
        .touch(objectId, info.ref.ttlMs)
        .catch((err: unknown) => this.opts.log.warn({ err, objectId }, 'tensor store: could not touch the durable copy'));
    }
    return info;
  }

  async delete(objectId: string): Promise<boolean> {
    let durableCopy = true;
    try {
      durableCopy = Boolean(this.opts.local.stat(objectId).ref.durableUri);
    } catch {
      // Not here (any more): the durable store may still have it.
    }
    const deleted = await this.opts.local.delete(objectId);
    if (!durableCopy) return deleted;
    const durableDeleted = await this.opts.durable.delete(objectId).catch((err: unknown) => {
      this.opts.log.warn({ err, objectId }, 'tensor store: could not delete the durable copy (its TTL will)');
      return false;
    });
    return deleted || durableDeleted;
  }

  async sweep(): Promise<number> {
    const n = await this.opts.local.sweep();
    try {
      await this.opts.durable.sweep();
      this.durableUsage = { ...(await this.opts.durable.usage()), uri: this.opts.durable.uri };
    } catch (err) {
      this.opts.log.warn({ err, store: this.opts.durable.uri }, 'tensor store: durable sweep failed');
    }
    return n;
  }

  usage(): StoreUsage {
    return { ...this.opts.local.usage(), ...(this.durableUsage ? { durable: this.durableUsage } : {}) };
  }

  async close(): Promise<void> {
    await this.opts.local.close();
    await this.opts.durable.close();
  }

  /** The header with `durableUri` when the policy writes the object through. */
  private mark(header: ObjectHeader): ObjectHeader {
    return writesThrough(this.opts.policy, header) ? { ...header, durableUri: this.opts.durable.uri } : header;
  }

  /** Copies a stored object's bytes from its file. */
  private async copyFromFile(ref: ObjectRef): Promise<ObjectRef> {
    const reader = await this.opts.local.openRead(ref.objectId, ref.checksum);
    const chunk = this.opts.chunkBytes;
    async function* pieces(): AsyncGenerator<Uint8Array> {
      for (let pos = 0; pos < ref.sizeBytes; pos += chunk) {
        const n = Math.min(chunk, ref.sizeBytes - pos);
        const buf = Buffer.allocUnsafe(n);
        await reader.readExactly(buf, n, pos);
        yield buf;
      }
    }
    try {
      await this.copy(ref, pieces());
    } finally {
      await reader.close();
    }
    return ref;
  }

  /** Writes the durable copy; on failure deletes the local object and fails the put. */
  private async copy(ref: ObjectRef, data: Uint8Array | AsyncIterable<Uint8Array>): Promise<void> {
    try {
      await this.opts.durable.write(ref, data, { ttlMs: ref.ttlMs });
    } catch (raw) {
      await this.opts.local.delete(ref.objectId).catch(() => undefined);
      const err = asDiffmeshError(raw);
      this.opts.log.warn({ err, objectId: ref.objectId, store: this.opts.durable.uri }, 'tensor store: write-through failed; put refused');
      throw new DiffmeshError(
        err.code === Code.INTERNAL ? Code.UNAVAILABLE : err.code,
        err.reason,
        `could not write "${ref.name}" through to ${this.opts.durable.uri}: ${err.message}`,
        {
          ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
          metadata: { ...err.metadata, object_id: ref.objectId },
        },
      );
    }
  }
}

/** An id not known here (not an expired one). */
function isUnknown(raw: unknown): boolean {
  const err = asDiffmeshError(raw);
  return err.code === Code.NOT_FOUND && err.reason === 'OBJECT_NOT_FOUND';
}

/** When the durable store does not have it either, the local answer stands. */
function preferLocal(local: unknown, durable: unknown): unknown {
  return isUnknown(durable) ? local : durable;
}

/** A key carrying a checksum the stored object must have. */
export function keyWithChecksum(objectId: string, checksum: string): ObjectRef {
  return {
    objectId,
    checksum,
    ownerAddress: '',
    ownerNodeId: '',
    shape: [],
    dtype: 'uint8',
    sizeBytes: 0,
    createdAt: 0,
    name: '',
    ttlMs: 0,
  };
}
