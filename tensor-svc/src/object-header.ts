/** What a put announces about its object, and the rule for object ids. */
import { invalidParameter, type Dtype } from '@diffmesh/core';

/** A validated Put header. */
export interface ObjectHeader {
  /** '' = assigned by the store. */
  objectId: string;
  name: string;
  shape: number[];
  dtype: Dtype;
  sizeBytes: number;
  /** 0 = the store's default. */
  ttlMs: number;
  /** `crc32c:<hex>` the bytes must match; '' = not checked. */
  checksum: string;
  /** The object is a request's final result (write-through policy `final`). */
  finalResult?: boolean;
  /** Set by the store when the object is written through: the durable store's URI, kept in its ref. */
  durableUri?: string;
}

/** Object ids are free-form strings up to this length, without control characters. */
const MAX_ID_LENGTH = 1024;

/** Checks an object id: non-empty, at most 1024 characters, no control characters. */
export function checkObjectId(id: string, field = 'object_id'): void {
  if (id === '') throw invalidParameter(field, 'is required');
  if (id.length > MAX_ID_LENGTH) throw invalidParameter(field, `must be at most ${MAX_ID_LENGTH} characters, got ${id.length}`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(id)) throw invalidParameter(field, 'must not contain control characters');
}
