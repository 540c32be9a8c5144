// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type { Dtype as _diffmesh_common_v1_Dtype, Dtype__Output as _diffmesh_common_v1_Dtype__Output } from '../../../diffmesh/common/v1/Dtype.js';
import type { Long } from '@grpc/proto-loader';

/**
 * First message of a Put.
 */
export interface PutHeader {
  /**
   * Empty: the store assigns one.
   */
  'objectId'?: (string);
  'name'?: (string);
  'shape'?: (number | string | Long)[];
  'dtype'?: (_diffmesh_common_v1_Dtype);
  /**
   * 0 = the store's default.
   */
  'ttlMs'?: (number);
  /**
   * Total length of the bytes that follow.
   */
  'sizeBytes'?: (number | string | Long);
  /**
   * `crc32c:<hex>` of the bytes; empty = not checked.
   */
  'checksum'?: (string);
  /**
   * The object is a request's final result (the output of its plan's last
   * stage). A tensor service whose write-through policy is `final` copies
   * only such objects to its durable store.
   */
  'finalResult'?: (boolean);
}

/**
 * First message of a Put.
 */
export interface PutHeader__Output {
  /**
   * Empty: the store assigns one.
   */
  'objectId': (string);
  'name': (string);
  'shape': (string)[];
  'dtype': (_diffmesh_common_v1_Dtype__Output);
  /**
   * 0 = the store's default.
   */
  'ttlMs': (number);
  /**
   * Total length of the bytes that follow.
   */
  'sizeBytes': (string);
  /**
   * `crc32c:<hex>` of the bytes; empty = not checked.
   */
  'checksum': (string);
  /**
   * The object is a request's final result (the output of its plan's last
   * stage). A tensor service whose write-through policy is `final` copies
   * only such objects to its durable store.
   */
  'finalResult': (boolean);
}
