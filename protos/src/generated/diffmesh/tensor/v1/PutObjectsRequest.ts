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
   * All of the object's bytes (header.size_bytes of them). Empty when
   * `shm_file` is set.
   */
  'data'?: (Buffer | Uint8Array | string);
  /**
   * W3C trace context of the client's put (traceparent, tracestate).
   */
  'traceContext'?: ({[key: string]: string});
  /**
   * Instead of `data`, for a client on the service's node: the name of a file
   * the client wrote in the `.incoming` folder of the service's shared-memory
   * directory, holding the object's bytes. The service checks its size and
   * header.checksum (required then) and takes the file over, whatever the
   * outcome: it becomes the object or is deleted. The bytes never cross the
   * network. A name the service cannot find there is answered NOT_FOUND with
   * field `shm_file` (the client is not on its node: send `data` instead).
   */
  'shmFile'?: (string);
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
   * All of the object's bytes (header.size_bytes of them). Empty when
   * `shm_file` is set.
   */
  'data': (Buffer);
  /**
   * W3C trace context of the client's put (traceparent, tracestate).
   */
  'traceContext': ({[key: string]: string});
  /**
   * Instead of `data`, for a client on the service's node: the name of a file
   * the client wrote in the `.incoming` folder of the service's shared-memory
   * directory, holding the object's bytes. The service checks its size and
   * header.checksum (required then) and takes the file over, whatever the
   * outcome: it becomes the object or is deleted. The bytes never cross the
   * network. A name the service cannot find there is answered NOT_FOUND with
   * field `shm_file` (the client is not on its node: send `data` instead).
   */
  'shmFile': (string);
}
