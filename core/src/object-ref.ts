/** Element types a tensor may hold. */
export type Dtype = 'float32' | 'float16' | 'int64' | 'int32' | 'uint8';

/**
 * A handle on a tensor held by a tensor store. Stages pass refs, never bytes.
 * `objectId` is `{requestId}:{name}:{unique}`.
 */
export interface ObjectRef {
  objectId: string;
  /** gRPC address of the tensor-svc that owns the bytes ('' for the in-process store). */
  ownerAddress: string;
  ownerNodeId: string;
  shape: number[];
  dtype: Dtype;
  sizeBytes: number;
  /** Milliseconds since the Unix epoch. */
  createdAt: number;
  /** Logical name within the request, e.g. `prompt_embeds`, `latents`. */
  name: string;
  /** Time to live in milliseconds from the last touch; 0 = store default. */
  ttlMs: number;
  /** `crc32c:<hex>` of the bytes. */
  checksum: string;
  /** The bytes, for a small object passed by value (no owner, nothing to delete). */
  inlineData?: Uint8Array;
  /**
   * Where the object's durable copy is (written through to redis or S3, or put there
   * directly): the store's URI without credentials, `redis://host:6379/0[/prefix]` or
   * `s3://bucket[/prefix]`, in which the copy is found by `objectId`. Absent or `''` when
   * there is none. Readers try shared memory on the owner's node, then the owner, then it.
   */
  durableUri?: string;
  /**
   * The capability to read, touch or delete the object, issued by the tensor service that
   * stored it (see tensor-svc's README). Whoever holds the ref holds it; absent when the
   * store issues none (capabilities off, or an inline object).
   */
  capability?: string;
}
