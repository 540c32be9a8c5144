import { randomUUID } from 'node:crypto';
import { type ObjectRef, Code, DiffmeshError } from '@diffmesh/core';
import { checksumOf, rangeOf } from './tensor-bytes.js';
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

/** Objects up to this size travel by value by default (64 KiB). */
export const DEFAULT_INLINE_MAX_BYTES = 64 * 1024;

/**
 * Passes small objects by value: a put of at most `maxBytes` returns a ref carrying the
 * bytes (`inlineData`), so text embeddings and small latents ride along with the task
 * instead of costing a tensor-service round trip on each side — as object stores of
 * distributed runtimes do for small values. Larger objects go to the wrapped store.
 * Reading an inline ref verifies its checksum; deleting one is a no-op.
 */
export class InlineTensorStore implements TensorStore {
  constructor(
    private readonly inner: TensorStore,
    private readonly maxBytes: number = DEFAULT_INLINE_MAX_BYTES,
  ) {}

  async put(input: PutTensorInput, opts?: PutOptions): Promise<ObjectRef> {
    if (input.data.byteLength > this.maxBytes) return this.inner.put(input, opts);
    const data = Uint8Array.from(input.data);
    return {
      objectId: `${input.requestId}:${input.name}:${randomUUID().slice(0, 8)}`,
      ownerAddress: '',
      ownerNodeId: '',
      shape: [...input.shape],
      dtype: input.dtype,
      sizeBytes: data.byteLength,
      createdAt: Date.now(),
      name: input.name,
      ttlMs: opts?.ttlMs ?? 0,
      checksum: checksumOf(data),
      inlineData: data,
    };
  }

  async get(key: ObjectKey, range?: GetOptions): Promise<StoredTensor> {
    if (typeof key !== 'string' && key.inlineData) {
      if (checksumOf(key.inlineData) !== key.checksum) {
        throw new DiffmeshError(Code.DATA_LOSS, 'CHECKSUM_MISMATCH', `object ${key.objectId}: inline bytes do not match their checksum`);
      }
      const [start, end] = rangeOf(key.objectId, key.inlineData.byteLength, range);
      return { ref: key, data: start === 0 && end === key.inlineData.byteLength ? key.inlineData : key.inlineData.subarray(start, end) };
    }
    return this.inner.get(key, range);
  }

  async stat(key: ObjectKey): Promise<ObjectInfo> {
    if (typeof key !== 'string' && key.inlineData) return { ref: key, expiresAt: 0 };
    return this.inner.stat(key);
  }

  async delete(key: ObjectKey): Promise<boolean> {
    if (typeof key !== 'string' && key.inlineData) return true;
    return this.inner.delete(key);
  }

  deleteRequest(requestId: string): Promise<number> {
    return this.inner.deleteRequest(requestId);
  }

  async touch(key: ObjectKey, ttlMs?: number): Promise<ObjectInfo> {
    if (typeof key !== 'string' && key.inlineData) return { ref: key, expiresAt: 0 };
    return this.inner.touch(key, ttlMs);
  }

  usage(): Promise<TensorStoreUsage> {
    return this.inner.usage();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
