import { Code, DiffmeshError, asDiffmeshError, type Logger, type ObjectRef } from '@diffmesh/core';
import type { DurableStore } from './durable-store.js';
import type { DurableStores } from './durable-stores.js';
import { scopedPutOptions } from './put-scope.js';
import type { RemoteTensorStore } from './remote-store.js';
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

/** Options of {@link RoutedTensorStore}. */
export interface RoutedTensorStoreOptions {
  /**
   * The tensor-svc client: puts go to this node's tensor-svc (unless `direct` is set), and
   * refs naming an owner are read through it (shared memory on the owner's node, else a Get
   * from the owner).
   */
  remote: RemoteTensorStore;
  /** Put into this redis/S3 store directly, with no tensor-svc (refs then name no owner). */
  direct?: DurableStore;
  /** Where refs' durable copies are read from. */
  durable: DurableStores;
  log?: Logger;
}

/** Counters of a {@link RoutedTensorStore}. */
export interface RoutedTensorStoreStats {
  /** Reads served by a durable copy because the owner could not serve them. */
  durableFallbacks: number;
  /** Reads of objects that live only in a durable store. */
  durableReads: number;
}

/**
 * The tensor store of a mesh process. Where an object lives is in its ref, and reads follow
 * it: shared memory on the owner's node, then the owner (a tensor-svc), then the durable copy
 * (`durableUri`, in redis or S3) when the owner cannot answer — it is unreachable, restarted
 * without the object, or its bytes failed their checksum. A ref without an owner lives only
 * in its durable store. Puts go to this node's tensor-svc, or straight into `direct`.
 * Deletes and touches go to the owner (which passes them on to its durable copy), and to the
 * durable copy itself when the owner cannot be reached.
 */
export class RoutedTensorStore implements TensorStore {
  private readonly counters: RoutedTensorStoreStats = { durableFallbacks: 0, durableReads: 0 };
  private closed = false;

  constructor(private readonly opts: RoutedTensorStoreOptions) {
    if (opts.direct) opts.durable.add(opts.direct);
  }

  stats(): RoutedTensorStoreStats {
    return { ...this.counters };
  }

  put(input: PutTensorInput, opts?: PutOptions): Promise<ObjectRef> {
    const o = scopedPutOptions(opts);
    return this.opts.direct ? this.opts.direct.put(input, o) : this.opts.remote.put(input, o);
  }

  get(key: ObjectKey, range?: GetOptions): Promise<StoredTensor> {
    return this.route(key, 'get', (s) => s.get(key, range));
  }

  stat(key: ObjectKey): Promise<ObjectInfo> {
    return this.route(key, 'stat', (s) => s.stat(key));
  }

  touch(key: ObjectKey, ttlMs?: number): Promise<ObjectInfo> {
    return this.route(key, 'touch', (s) => s.touch(key, ttlMs));
  }

  async delete(key: ObjectKey): Promise<boolean> {
    const ref = typeof key === 'string' ? undefined : key;
    if (!ref?.durableUri) return this.home(key).delete(key);
    if (!ref.ownerAddress) return this.durableOf(ref).delete(ref);
    try {
      // The owner deletes its durable copy too.
      return await this.opts.remote.delete(ref);
    } catch (err) {
      if (this.closed || !fallsBack(err)) throw err;
      this.opts.log?.debug(
        { objectId: ref.objectId, err: asDiffmeshError(err).message },
        'tensor delete: owner unreachable; deleting the durable copy',
      );
      return this.durableOf(ref).delete(ref);
    }
  }

  async deleteRequest(requestId: string): Promise<number> {
    const n = await this.opts.remote.deleteRequest(requestId);
    return n + (this.opts.direct ? await this.opts.direct.deleteRequest(requestId) : 0);
  }

  usage(): Promise<TensorStoreUsage> {
    return (this.opts.direct ?? this.opts.remote).usage();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.opts.remote.close();
    await this.opts.direct?.close();
    await this.opts.durable.close();
  }

  /** Reads from the owner, falling back to the durable copy; a ref without an owner from its durable store. */
  private async route<T>(key: ObjectKey, op: string, fn: (s: TensorStore) => Promise<T>): Promise<T> {
    const ref = typeof key === 'string' ? undefined : key;
    if (!ref || ref.inlineData || !ref.durableUri) return fn(this.home(key));
    if (!ref.ownerAddress) {
      this.counters.durableReads += op === 'get' ? 1 : 0;
      return fn(this.durableOf(ref));
    }
    try {
      return await fn(this.opts.remote);
    } catch (err) {
      if (this.closed || !fallsBack(err)) throw err;
      let durable: DurableStore;
      try {
        durable = this.durableOf(ref);
      } catch {
        throw err;
      }
      try {
        const result = await fn(durable);
        if (op === 'get') this.counters.durableFallbacks += 1;
        this.opts.log?.info(
          { objectId: ref.objectId, owner: ref.ownerAddress, durable: ref.durableUri, reason: asDiffmeshError(err).reason },
          `tensor ${op}: served from the durable copy (the owner could not)`,
        );
        return result;
      } catch (second) {
        this.opts.log?.debug({ objectId: ref.objectId, err: asDiffmeshError(second).message }, `tensor ${op}: durable copy failed too`);
        throw err;
      }
    }
  }

  /** Where objects named only by id, or by refs without a durable copy, live. */
  private home(key: ObjectKey): TensorStore {
    const ref = typeof key === 'string' ? undefined : key;
    if (this.opts.direct && !ref?.ownerAddress && !ref?.inlineData) return this.opts.direct;
    return this.opts.remote;
  }

  private durableOf(ref: ObjectRef): DurableStore {
    try {
      return this.opts.durable.open(ref.durableUri!);
    } catch (err) {
      throw new DiffmeshError(Code.FAILED_PRECONDITION, 'INVALID_PARAMETER', `object ${ref.objectId}: ${(err as Error).message}`, {
        metadata: { field: 'durable_uri', object_id: ref.objectId },
      });
    }
  }
}

/** Whether the durable copy is worth trying after the owner failed: anything but a bad request or a cancellation. */
function fallsBack(raw: unknown): boolean {
  const err = asDiffmeshError(raw);
  return err.code !== Code.INVALID_ARGUMENT && err.code !== Code.CANCELLED;
}
