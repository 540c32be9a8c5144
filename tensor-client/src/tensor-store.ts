import type { Dtype, ObjectRef } from '@diffmesh/core';

/**
 * The tensor store seam: where stages keep the tensors they hand each other by
 * {@link ObjectRef}. Backends are chosen by configuration through `createTensorStore`.
 *
 * Errors (all `DiffmeshError`):
 * - unknown id → `NOT_FOUND` / `OBJECT_NOT_FOUND`; TTL passed → `NOT_FOUND` / `OBJECT_EXPIRED`
 *   (a store reports an id as expired for as long as it remembers it, then as not found);
 * - bytes that no longer match their checksum → `DATA_LOSS` / `CHECKSUM_MISMATCH`;
 * - a put that would exceed the capacity → `RESOURCE_EXHAUSTED` / `STORE_FULL`;
 * - bad input (shape/dtype/size disagree, bad names, bad TTL) → `INVALID_ARGUMENT` / `INVALID_PARAMETER`;
 * - any call after `close()` → `UNAVAILABLE` / `DRAINING`.
 */
export interface TensorStore {
  /**
   * Stores a tensor and returns its ref (`objectId` = `{requestId}:{name}:{unique}`,
   * `checksum` = `crc32c:<hex>`). The store keeps `data` as given, without copying: the
   * caller must not modify it afterwards.
   */
  put(input: PutTensorInput, opts?: PutOptions): Promise<ObjectRef>;

  /**
   * Returns a tensor's ref and bytes, verifying the bytes against the checksum. The bytes
   * are the store's own: treat them as read-only. Reading does not extend the TTL. With
   * `offset`/`length`, `data` holds only that range; the checksum still covers the whole
   * object, so every byte is read and checked (a range past the end is INVALID_ARGUMENT
   * naming `offset` or `length`).
   */
  get(key: ObjectKey, opts?: GetOptions): Promise<StoredTensor>;

  /** A tensor's ref and expiry, without its bytes. */
  stat(key: ObjectKey): Promise<ObjectInfo>;

  /** Deletes a tensor; false when it did not exist (deleting is idempotent). */
  delete(key: ObjectKey): Promise<boolean>;

  /** Deletes every tensor of a request; returns how many were deleted. */
  deleteRequest(requestId: string): Promise<number>;

  /** Restarts a tensor's TTL from now, with `ttlMs` if given (0 = store default) or its current TTL. */
  touch(key: ObjectKey, ttlMs?: number): Promise<ObjectInfo>;

  /** Objects and bytes currently held. */
  usage(): Promise<TensorStoreUsage>;

  /** Stops background work and releases every tensor. Idempotent. */
  close(): Promise<void>;
}

/** A tensor to store. */
export interface PutTensorInput {
  /** Request the tensor belongs to; no `:`. */
  requestId: string;
  /** Logical name within the request, e.g. `prompt_embeds`, `latents`; no `:`. */
  name: string;
  /** Raw little-endian element bytes; `byteLength` must equal product(shape) × dtype size. */
  data: Uint8Array;
  shape: readonly number[];
  dtype: Dtype;
}

/** Options of {@link TensorStore.put}. */
export interface PutOptions {
  /** Time to live in milliseconds from the last touch; 0 or absent = the store's default. */
  ttlMs?: number;
  /**
   * The tensor is a request's final result (an output of its plan's last stage). A tensor-svc
   * whose write-through policy is `final` copies only such objects to its durable store.
   */
  finalResult?: boolean;
}

/** Options of {@link TensorStore.get}. */
export interface GetOptions {
  /** First byte returned. Default 0. */
  offset?: number;
  /** Bytes returned; 0 or absent = to the end. */
  length?: number;
}

/** An object id, or a ref carrying it (its checksum is then checked too). */
export type ObjectKey = ObjectRef | string;

/** A stored tensor with its bytes. */
export interface StoredTensor {
  ref: ObjectRef;
  data: Uint8Array;
}

/** A stored tensor's metadata. */
export interface ObjectInfo {
  ref: ObjectRef;
  /** When the object expires unless touched (milliseconds since the Unix epoch). */
  expiresAt: number;
}

/** What a store holds. */
export interface TensorStoreUsage {
  objects: number;
  bytes: number;
  capacityBytes: number;
}
