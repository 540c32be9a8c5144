/**
 * tensor-svc with `--backend redis|s3`: the service's objects live in a durable store, not on
 * its node. The gRPC API is the same; puts stream into the store as they arrive, gets stream
 * out of it, and there is no shared-memory directory (same-node clients use gRPC).
 */
import { randomBytes } from 'node:crypto';
import { Code, DiffmeshError, invalidParameter, type Logger, type ObjectRef } from '@diffmesh/core';
import type { DurableStore, ObjectInfo } from '@diffmesh/tensor-client';
import { checkObjectId, type ObjectHeader } from './object-header.js';
import type { ObjectSource, ObjectStore, ObjectWriter, StoredObjectInfo, StoreUsage } from './object-store.js';
import { keyWithChecksum } from './write-through.js';

/** Options of {@link DurableBackedStore}. */
export interface DurableBackedStoreOptions {
  durable: DurableStore;
  defaultTtlMs: number;
  log: Logger;
  now?: () => number;
}

const EMPTY_TIER = { objects: 0, bytes: 0, reservedBytes: 0, capacityBytes: 0, dir: '' };

/** An {@link ObjectStore} that is a durable store alone. */
export class DurableBackedStore implements ObjectStore {
  readonly shmDir = undefined;
  private durableUsage: StoreUsage['durable'];
  private readonly now: () => number;

  constructor(private readonly opts: DurableBackedStoreOptions) {
    this.now = opts.now ?? Date.now;
  }

  async beginPut(header: ObjectHeader): Promise<ObjectWriter> {
    return new StreamingWriter(this.refOf(header), this.opts.durable);
  }

  async putWhole(header: ObjectHeader, data: Uint8Array): Promise<ObjectRef> {
    if (data.byteLength !== header.sizeBytes) {
      throw invalidParameter('data', `${data.byteLength} bytes; header.size_bytes announced ${header.sizeBytes}`);
    }
    return (await this.opts.durable.write(this.refOf(header), data)).ref;
  }

  async adopt(): Promise<ObjectRef> {
    // No shared-memory directory: the client puts the bytes over gRPC instead.
    throw new DiffmeshError(
      Code.NOT_FOUND,
      'OBJECT_NOT_FOUND',
      'shm_file: this tensor-svc keeps objects in a durable store, not in shared memory',
      {
        metadata: { field: 'shm_file' },
      },
    );
  }

  openRead(objectId: string, checksum = ''): Promise<ObjectSource> {
    return this.opts.durable.openRead(checksum ? keyWithChecksum(objectId, checksum) : objectId);
  }

  async stat(objectId: string): Promise<StoredObjectInfo> {
    return { ...(await this.opts.durable.stat(objectId)), tier: 'durable' };
  }

  delete(objectId: string): Promise<boolean> {
    return this.opts.durable.delete(objectId);
  }

  async touch(objectId: string, ttlMs = 0): Promise<StoredObjectInfo> {
    return { ...(await this.opts.durable.touch(objectId, ttlMs || undefined)), tier: 'durable' };
  }

  async sweep(): Promise<number> {
    const n = await this.opts.durable.sweep();
    this.durableUsage = { ...(await this.opts.durable.usage()), uri: this.opts.durable.uri };
    return n;
  }

  usage(): StoreUsage {
    return {
      memory: { ...EMPTY_TIER, spillThresholdBytes: 0 },
      disk: EMPTY_TIER,
      ...(this.durableUsage ? { durable: this.durableUsage } : {}),
    };
  }

  close(): Promise<void> {
    return this.opts.durable.close();
  }

  private refOf(h: ObjectHeader): ObjectRef {
    const objectId = h.objectId || `anon:${h.name}:${randomBytes(6).toString('hex')}`;
    checkObjectId(objectId, 'header.object_id');
    return {
      objectId,
      ownerAddress: '',
      ownerNodeId: '',
      shape: [...h.shape],
      dtype: h.dtype,
      sizeBytes: h.sizeBytes,
      createdAt: this.now(),
      name: h.name,
      ttlMs: h.ttlMs || this.opts.defaultTtlMs,
      checksum: h.checksum,
    };
  }
}

interface Pending {
  data: Uint8Array;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * A Put streamed into the durable store: chunks are handed to the store's write as it asks for
 * them, and each `write()` resolves once the store has taken its chunk, so the service's
 * per-stream byte budget bounds what waits in memory.
 */
class StreamingWriter implements ObjectWriter {
  private received = 0;
  private readonly queue: Pending[] = [];
  private wake: (() => void) | undefined;
  private ended = false;
  private failure: Error | undefined;
  private readonly done: Promise<ObjectInfo>;

  constructor(
    private readonly ref: ObjectRef,
    durable: DurableStore,
  ) {
    this.done = durable.write(ref, this.pull());
    this.done.catch((err: unknown) => this.fail(err instanceof Error ? err : new Error(String(err))));
  }

  get bytesReceived(): number {
    return this.received;
  }

  write(offset: number, data: Uint8Array): Promise<void> {
    if (offset !== this.received) {
      throw invalidParameter('chunk.offset', `expected ${this.received} (chunks come in order, without gaps), got ${offset}`);
    }
    if (this.received + data.byteLength > this.ref.sizeBytes) {
      throw invalidParameter(
        'chunk.data',
        `${this.received + data.byteLength} bytes received; header.size_bytes announced ${this.ref.sizeBytes}`,
      );
    }
    this.received += data.byteLength;
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ data, resolve, reject });
      this.wake?.();
    });
  }

  async commit(): Promise<ObjectRef> {
    if (this.received !== this.ref.sizeBytes) {
      throw invalidParameter('header.size_bytes', `the stream ended after ${this.received} of ${this.ref.sizeBytes} bytes`);
    }
    this.ended = true;
    this.wake?.();
    return (await this.done).ref;
  }

  async abort(): Promise<void> {
    this.fail(new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'put aborted'));
    await this.done.catch(() => undefined);
  }

  private fail(err: Error): void {
    if (this.failure !== undefined) return;
    this.failure = err;
    for (const p of this.queue.splice(0)) p.reject(err);
    this.wake?.();
  }

  private async *pull(): AsyncGenerator<Uint8Array> {
    for (;;) {
      const next = this.queue.shift();
      if (next) {
        next.resolve();
        yield next.data;
        continue;
      }
      if (this.failure !== undefined) throw this.failure;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}
