// Original file: proto/diffmesh/common/v1/object.proto

import type { Dtype as _diffmesh_common_v1_Dtype, Dtype__Output as _diffmesh_common_v1_Dtype__Output } from '../../../diffmesh/common/v1/Dtype.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';
import type { Long } from '@grpc/proto-loader';

/**
 * A handle on a tensor held by a tensor service. Stages hand each other refs;
 * the bytes flow point to point from the owning tensor service.
 */
export interface ObjectRef {
  /**
   * `{request_id}:{name}:{unique}`. Contains ':' characters: percent-encode it
   * in URL paths.
   */
  'objectId'?: (string);
  /**
   * gRPC address (`host:port`) of the tensor service that owns the bytes;
   * empty for the in-process store.
   */
  'ownerAddress'?: (string);
  /**
   * Node the owning tensor service runs on (same node: shared-memory fast path).
   */
  'ownerNodeId'?: (string);
  /**
   * Dimensions, outermost first.
   */
  'shape'?: (number | string | Long)[];
  'dtype'?: (_diffmesh_common_v1_Dtype);
  /**
   * Length of the tensor's bytes.
   */
  'sizeBytes'?: (number | string | Long);
  'createdAt'?: (_google_protobuf_Timestamp | null);
  /**
   * Logical name within the request, e.g. `prompt_embeds`, `latents`.
   */
  'name'?: (string);
  /**
   * Time to live in milliseconds from the last touch; 0 = the store's default.
   */
  'ttlMs'?: (number);
  /**
   * `crc32c:<hex>` of the bytes.
   */
  'checksum'?: (string);
  /**
   * The bytes themselves, for small objects passed by value instead of through a
   * tensor service (empty otherwise). Such a ref has no owner and needs no delete.
   */
  'inlineData'?: (Buffer | Uint8Array | string);
  /**
   * Where the object's durable copy is, when it was written through to a
   * redis or S3-compatible store (or put there directly): the store's URI
   * without credentials, `redis://host:6379/0[/prefix]` or
   * `s3://bucket[/prefix]`, in which the copy is found by `object_id`. Empty
   * when the object has no durable copy. Readers try shared memory on the
   * owner's node, then the owner, then this copy.
   */
  'durableUri'?: (string);
  /**
   * The capability to read, touch or delete the object: issued by the tensor
   * service that stored it (an HMAC of the object id under the mesh's
   * capability key), and required by it when capabilities are on. Whoever
   * holds the ref may read the object; nobody else can guess it.
   */
  'capability'?: (string);
}

/**
 * A handle on a tensor held by a tensor service. Stages hand each other refs;
 * the bytes flow point to point from the owning tensor service.
 */
export interface ObjectRef__Output {
  /**
   * `{request_id}:{name}:{unique}`. Contains ':' characters: percent-encode it
   * in URL paths.
   */
  'objectId': (string);
  /**
   * gRPC address (`host:port`) of the tensor service that owns the bytes;
   * empty for the in-process store.
   */
  'ownerAddress': (string);
  /**
   * Node the owning tensor service runs on (same node: shared-memory fast path).
   */
  'ownerNodeId': (string);
  /**
   * Dimensions, outermost first.
   */
  'shape': (string)[];
  'dtype': (_diffmesh_common_v1_Dtype__Output);
  /**
   * Length of the tensor's bytes.
   */
  'sizeBytes': (string);
  'createdAt': (_google_protobuf_Timestamp__Output | null);
  /**
   * Logical name within the request, e.g. `prompt_embeds`, `latents`.
   */
  'name': (string);
  /**
   * Time to live in milliseconds from the last touch; 0 = the store's default.
   */
  'ttlMs': (number);
  /**
   * `crc32c:<hex>` of the bytes.
   */
  'checksum': (string);
  /**
   * The bytes themselves, for small objects passed by value instead of through a
   * tensor service (empty otherwise). Such a ref has no owner and needs no delete.
   */
  'inlineData': (Buffer);
  /**
   * Where the object's durable copy is, when it was written through to a
   * redis or S3-compatible store (or put there directly): the store's URI
   * without credentials, `redis://host:6379/0[/prefix]` or
   * `s3://bucket[/prefix]`, in which the copy is found by `object_id`. Empty
   * when the object has no durable copy. Readers try shared memory on the
   * owner's node, then the owner, then this copy.
   */
  'durableUri': (string);
  /**
   * The capability to read, touch or delete the object: issued by the tensor
   * service that stored it (an HMAC of the object id under the mesh's
   * capability key), and required by it when capabilities are on. Whoever
   * holds the ref may read the object; nobody else can guess it.
   */
  'capability': (string);
}
