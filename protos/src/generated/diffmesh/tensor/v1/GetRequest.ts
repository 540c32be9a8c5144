// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type { Long } from '@grpc/proto-loader';

export interface GetRequest {
  'objectId'?: (string);
  /**
   * First byte to read.
   */
  'offset'?: (number | string | Long);
  /**
   * Bytes to read; 0 = to the end.
   */
  'length'?: (number | string | Long);
  /**
   * The object's capability, from its ObjectRef (required when the tensor
   * service issues capabilities; see ObjectRef.capability).
   */
  'capability'?: (string);
}

export interface GetRequest__Output {
  'objectId': (string);
  /**
   * First byte to read.
   */
  'offset': (string);
  /**
   * Bytes to read; 0 = to the end.
   */
  'length': (string);
  /**
   * The object's capability, from its ObjectRef (required when the tensor
   * service issues capabilities; see ObjectRef.capability).
   */
  'capability': (string);
}
