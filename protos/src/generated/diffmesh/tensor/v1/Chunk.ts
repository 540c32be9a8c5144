// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type { Long } from '@grpc/proto-loader';

/**
 * A slice of an object's bytes.
 */
export interface Chunk {
  /**
   * Position of `data` in the object.
   */
  'offset'?: (number | string | Long);
  'data'?: (Buffer | Uint8Array | string);
}

/**
 * A slice of an object's bytes.
 */
export interface Chunk__Output {
  /**
   * Position of `data` in the object.
   */
  'offset': (string);
  'data': (Buffer);
}
