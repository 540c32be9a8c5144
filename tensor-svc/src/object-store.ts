/**
 * The port the gRPC service works against: where objects are stored. Behind it sit the
 * node-local {@link TieredStore} (shared memory and disk spill), that store with write-through
 * to a durable redis/S3 copy ({@link WriteThroughStore}), or a redis/S3 store alone
 * ({@link DurableBackedStore}, `--backend redis|s3`).
 */
import type { ObjectRef } from '@diffmesh/core';
import type { ObjectHeader } from './object-header.js';
import type { Tier, TierUsage } from './placement.js';

/** Where an object's bytes are: a local tier, or only in the durable store. */
export type ObjectTier = Tier | 'durable';

/** A stored object's metadata (the ref's owner fields are filled by the service). */
export interface StoredObjectInfo {
  ref: ObjectRef;
  tier: ObjectTier;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

/** What a store holds, by tier. */
export interface StoreUsage {
  memory: TierUsage & { spillThresholdBytes: number };
  disk: TierUsage;
  /** The durable store (write-through target or backend), as last measured. */
  durable?: { objects: number; bytes: number; capacityBytes: number; uri: string };
}

/** A put being received chunk by chunk. */
export interface ObjectWriter {
  readonly bytesReceived: number;
  /** Accepts the next chunk (throws INVALID_ARGUMENT synchronously on a bad offset or size). */
  write(offset: number, data: Uint8Array): Promise<void>;
  /** Checks size and checksum and publishes the object. */
  commit(): Promise<ObjectRef>;
  /** Discards what was received. Idempotent; never throws. */
  abort(): Promise<void>;
}

/** An object open for reading. */
export interface ObjectSource {
  readonly ref: ObjectRef;
  /** Fills `buf[0, length)` from `position`; DATA_LOSS when the bytes end early. */
  readExactly(buf: Uint8Array, length: number, position: number): Promise<void>;
  close(): Promise<void>;
}

/** The object store behind tensor-svc's API. Errors as in TensorStore (OBJECT_NOT_FOUND, STORE_FULL, …). */
export interface ObjectStore {
  /** The shared-memory directory same-node clients read and put through; undefined when there is none. */
  readonly shmDir: string | undefined;
  beginPut(header: ObjectHeader): Promise<ObjectWriter>;
  putWhole(header: ObjectHeader, data: Uint8Array): Promise<ObjectRef>;
  /** Takes over a file a same-node client wrote in `<shmDir>/.incoming`. */
  adopt(header: ObjectHeader, fileName: string): Promise<ObjectRef>;
  openRead(objectId: string, checksum?: string): Promise<ObjectSource>;
  stat(objectId: string): Promise<StoredObjectInfo> | StoredObjectInfo;
  delete(objectId: string): Promise<boolean>;
  touch(objectId: string, ttlMs?: number): Promise<StoredObjectInfo>;
  /** Deletes what expired; returns how many objects. */
  sweep(): Promise<number>;
  usage(): StoreUsage;
  close(): Promise<void>;
}
