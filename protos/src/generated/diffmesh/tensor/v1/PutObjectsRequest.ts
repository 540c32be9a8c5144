// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type { PutHeader as _diffmesh_tensor_v1_PutHeader, PutHeader__Output as _diffmesh_tensor_v1_PutHeader__Output } from '../../../diffmesh/tensor/v1/PutHeader.js';
import type { Long } from '@grpc/proto-loader';

/**
 * One whole object of a PutObjects stream.
 */
export interface PutObjectsRequest {
  /**
   * Chosen by the client, unique on the stream; echoed in the answer.
   */
  'sequence'?: (number | string | Long);
  'header'?: (_diffmesh_tensor_v1_PutHeader | null);
  /**
   * All of the object's bytes (header.size_bytes of them).
   */
  'data'?: (Buffer | Uint8Array | string);
  /**
   * W3C trace context of the client's put (traceparent, tracestate).
   */
  'traceContext'?: ({[key: string]: string});
}

/**
 * One whole object of a PutObjects stream.
 */
export interface PutObjectsRequest__Output {
  /**
   * Chosen by the client, unique on the stream; echoed in the answer.
   */
  'sequence': (string);
  'header': (_diffmesh_tensor_v1_PutHeader__Output | null);
  /**
   * All of the object's bytes (header.size_bytes of them).
   */
  'data': (Buffer);
  /**
   * W3C trace context of the client's put (traceparent, tracestate).
   */
  'traceContext': ({[key: string]: string});
}
