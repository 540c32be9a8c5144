// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { DeleteRequest as _diffmesh_tensor_v1_DeleteRequest, DeleteRequest__Output as _diffmesh_tensor_v1_DeleteRequest__Output } from '../../../diffmesh/tensor/v1/DeleteRequest.js';
import type { DeleteResponse as _diffmesh_tensor_v1_DeleteResponse, DeleteResponse__Output as _diffmesh_tensor_v1_DeleteResponse__Output } from '../../../diffmesh/tensor/v1/DeleteResponse.js';
import type { GetRequest as _diffmesh_tensor_v1_GetRequest, GetRequest__Output as _diffmesh_tensor_v1_GetRequest__Output } from '../../../diffmesh/tensor/v1/GetRequest.js';
import type { GetResponse as _diffmesh_tensor_v1_GetResponse, GetResponse__Output as _diffmesh_tensor_v1_GetResponse__Output } from '../../../diffmesh/tensor/v1/GetResponse.js';
import type { PutObjectsRequest as _diffmesh_tensor_v1_PutObjectsRequest, PutObjectsRequest__Output as _diffmesh_tensor_v1_PutObjectsRequest__Output } from '../../../diffmesh/tensor/v1/PutObjectsRequest.js';
import type { PutObjectsResponse as _diffmesh_tensor_v1_PutObjectsResponse, PutObjectsResponse__Output as _diffmesh_tensor_v1_PutObjectsResponse__Output } from '../../../diffmesh/tensor/v1/PutObjectsResponse.js';
import type { PutRequest as _diffmesh_tensor_v1_PutRequest, PutRequest__Output as _diffmesh_tensor_v1_PutRequest__Output } from '../../../diffmesh/tensor/v1/PutRequest.js';
import type { PutResponse as _diffmesh_tensor_v1_PutResponse, PutResponse__Output as _diffmesh_tensor_v1_PutResponse__Output } from '../../../diffmesh/tensor/v1/PutResponse.js';
import type { StatRequest as _diffmesh_tensor_v1_StatRequest, StatRequest__Output as _diffmesh_tensor_v1_StatRequest__Output } from '../../../diffmesh/tensor/v1/StatRequest.js';
import type { StatResponse as _diffmesh_tensor_v1_StatResponse, StatResponse__Output as _diffmesh_tensor_v1_StatResponse__Output } from '../../../diffmesh/tensor/v1/StatResponse.js';
import type { TouchRequest as _diffmesh_tensor_v1_TouchRequest, TouchRequest__Output as _diffmesh_tensor_v1_TouchRequest__Output } from '../../../diffmesh/tensor/v1/TouchRequest.js';
import type { TouchResponse as _diffmesh_tensor_v1_TouchResponse, TouchResponse__Output as _diffmesh_tensor_v1_TouchResponse__Output } from '../../../diffmesh/tensor/v1/TouchResponse.js';

/**
 * The node-local object store for tensors. Bytes move in chunked streams
 * with flow-control backpressure.
 */
export interface TensorServiceClient extends grpc.Client {
  /**
   * Deletes an object; deleting a missing object is not an error.
   */
  Delete(argument: _diffmesh_tensor_v1_DeleteRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_DeleteResponse__Output>): grpc.ClientUnaryCall;
  Delete(argument: _diffmesh_tensor_v1_DeleteRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_tensor_v1_DeleteResponse__Output>): grpc.ClientUnaryCall;
  Delete(argument: _diffmesh_tensor_v1_DeleteRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_DeleteResponse__Output>): grpc.ClientUnaryCall;
  Delete(argument: _diffmesh_tensor_v1_DeleteRequest, callback: grpc.requestCallback<_diffmesh_tensor_v1_DeleteResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Deletes an object; deleting a missing object is not an error.
   */
  delete(argument: _diffmesh_tensor_v1_DeleteRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_DeleteResponse__Output>): grpc.ClientUnaryCall;
  delete(argument: _diffmesh_tensor_v1_DeleteRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_tensor_v1_DeleteResponse__Output>): grpc.ClientUnaryCall;
  delete(argument: _diffmesh_tensor_v1_DeleteRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_DeleteResponse__Output>): grpc.ClientUnaryCall;
  delete(argument: _diffmesh_tensor_v1_DeleteRequest, callback: grpc.requestCallback<_diffmesh_tensor_v1_DeleteResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Reads an object: first a header (the ObjectRef), then the bytes in chunks.
   */
  Get(argument: _diffmesh_tensor_v1_GetRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_tensor_v1_GetResponse__Output>;
  Get(argument: _diffmesh_tensor_v1_GetRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_tensor_v1_GetResponse__Output>;
  /**
   * Reads an object: first a header (the ObjectRef), then the bytes in chunks.
   */
  get(argument: _diffmesh_tensor_v1_GetRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_tensor_v1_GetResponse__Output>;
  get(argument: _diffmesh_tensor_v1_GetRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_tensor_v1_GetResponse__Output>;
  
  /**
   * Stores an object: first a header, then the bytes in chunks, in order.
   */
  Put(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_PutResponse__Output>): grpc.ClientWritableStream<_diffmesh_tensor_v1_PutRequest>;
  Put(metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_tensor_v1_PutResponse__Output>): grpc.ClientWritableStream<_diffmesh_tensor_v1_PutRequest>;
  Put(options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_PutResponse__Output>): grpc.ClientWritableStream<_diffmesh_tensor_v1_PutRequest>;
  Put(callback: grpc.requestCallback<_diffmesh_tensor_v1_PutResponse__Output>): grpc.ClientWritableStream<_diffmesh_tensor_v1_PutRequest>;
  /**
   * Stores an object: first a header, then the bytes in chunks, in order.
   */
  put(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_PutResponse__Output>): grpc.ClientWritableStream<_diffmesh_tensor_v1_PutRequest>;
  put(metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_tensor_v1_PutResponse__Output>): grpc.ClientWritableStream<_diffmesh_tensor_v1_PutRequest>;
  put(options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_PutResponse__Output>): grpc.ClientWritableStream<_diffmesh_tensor_v1_PutRequest>;
  put(callback: grpc.requestCallback<_diffmesh_tensor_v1_PutResponse__Output>): grpc.ClientWritableStream<_diffmesh_tensor_v1_PutRequest>;
  
  /**
   * Stores small objects, each whole in one message, on one long-lived stream:
   * a client keeps the stream open and sends as many objects as it likes, and
   * each answer carries the sequence number of its object. Saves a call per
   * object; Put is for objects larger than a message should be. A failed
   * object is answered with its error and the stream goes on.
   */
  PutObjects(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_tensor_v1_PutObjectsRequest, _diffmesh_tensor_v1_PutObjectsResponse__Output>;
  PutObjects(options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_tensor_v1_PutObjectsRequest, _diffmesh_tensor_v1_PutObjectsResponse__Output>;
  /**
   * Stores small objects, each whole in one message, on one long-lived stream:
   * a client keeps the stream open and sends as many objects as it likes, and
   * each answer carries the sequence number of its object. Saves a call per
   * object; Put is for objects larger than a message should be. A failed
   * object is answered with its error and the stream goes on.
   */
  putObjects(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_tensor_v1_PutObjectsRequest, _diffmesh_tensor_v1_PutObjectsResponse__Output>;
  putObjects(options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_tensor_v1_PutObjectsRequest, _diffmesh_tensor_v1_PutObjectsResponse__Output>;
  
  /**
   * Returns an object's ref without its bytes.
   */
  Stat(argument: _diffmesh_tensor_v1_StatRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_StatResponse__Output>): grpc.ClientUnaryCall;
  Stat(argument: _diffmesh_tensor_v1_StatRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_tensor_v1_StatResponse__Output>): grpc.ClientUnaryCall;
  Stat(argument: _diffmesh_tensor_v1_StatRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_StatResponse__Output>): grpc.ClientUnaryCall;
  Stat(argument: _diffmesh_tensor_v1_StatRequest, callback: grpc.requestCallback<_diffmesh_tensor_v1_StatResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Returns an object's ref without its bytes.
   */
  stat(argument: _diffmesh_tensor_v1_StatRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_StatResponse__Output>): grpc.ClientUnaryCall;
  stat(argument: _diffmesh_tensor_v1_StatRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_tensor_v1_StatResponse__Output>): grpc.ClientUnaryCall;
  stat(argument: _diffmesh_tensor_v1_StatRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_StatResponse__Output>): grpc.ClientUnaryCall;
  stat(argument: _diffmesh_tensor_v1_StatRequest, callback: grpc.requestCallback<_diffmesh_tensor_v1_StatResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Restarts an object's time to live.
   */
  Touch(argument: _diffmesh_tensor_v1_TouchRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_TouchResponse__Output>): grpc.ClientUnaryCall;
  Touch(argument: _diffmesh_tensor_v1_TouchRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_tensor_v1_TouchResponse__Output>): grpc.ClientUnaryCall;
  Touch(argument: _diffmesh_tensor_v1_TouchRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_TouchResponse__Output>): grpc.ClientUnaryCall;
  Touch(argument: _diffmesh_tensor_v1_TouchRequest, callback: grpc.requestCallback<_diffmesh_tensor_v1_TouchResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Restarts an object's time to live.
   */
  touch(argument: _diffmesh_tensor_v1_TouchRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_TouchResponse__Output>): grpc.ClientUnaryCall;
  touch(argument: _diffmesh_tensor_v1_TouchRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_tensor_v1_TouchResponse__Output>): grpc.ClientUnaryCall;
  touch(argument: _diffmesh_tensor_v1_TouchRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_tensor_v1_TouchResponse__Output>): grpc.ClientUnaryCall;
  touch(argument: _diffmesh_tensor_v1_TouchRequest, callback: grpc.requestCallback<_diffmesh_tensor_v1_TouchResponse__Output>): grpc.ClientUnaryCall;
  
}

/**
 * The node-local object store for tensors. Bytes move in chunked streams
 * with flow-control backpressure.
 */
export interface TensorServiceHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Deletes an object; deleting a missing object is not an error.
   */
  Delete: grpc.handleUnaryCall<_diffmesh_tensor_v1_DeleteRequest__Output, _diffmesh_tensor_v1_DeleteResponse>;
  
  /**
   * Reads an object: first a header (the ObjectRef), then the bytes in chunks.
   */
  Get: grpc.handleServerStreamingCall<_diffmesh_tensor_v1_GetRequest__Output, _diffmesh_tensor_v1_GetResponse>;
  
  /**
   * Stores an object: first a header, then the bytes in chunks, in order.
   */
  Put: grpc.handleClientStreamingCall<_diffmesh_tensor_v1_PutRequest__Output, _diffmesh_tensor_v1_PutResponse>;
  
  /**
   * Stores small objects, each whole in one message, on one long-lived stream:
   * a client keeps the stream open and sends as many objects as it likes, and
   * each answer carries the sequence number of its object. Saves a call per
   * object; Put is for objects larger than a message should be. A failed
   * object is answered with its error and the stream goes on.
   */
  PutObjects: grpc.handleBidiStreamingCall<_diffmesh_tensor_v1_PutObjectsRequest__Output, _diffmesh_tensor_v1_PutObjectsResponse>;
  
  /**
   * Returns an object's ref without its bytes.
   */
  Stat: grpc.handleUnaryCall<_diffmesh_tensor_v1_StatRequest__Output, _diffmesh_tensor_v1_StatResponse>;
  
  /**
   * Restarts an object's time to live.
   */
  Touch: grpc.handleUnaryCall<_diffmesh_tensor_v1_TouchRequest__Output, _diffmesh_tensor_v1_TouchResponse>;
  
}

export interface TensorServiceDefinition extends grpc.ServiceDefinition {
  Delete: MethodDefinition<_diffmesh_tensor_v1_DeleteRequest, _diffmesh_tensor_v1_DeleteResponse, _diffmesh_tensor_v1_DeleteRequest__Output, _diffmesh_tensor_v1_DeleteResponse__Output>
  Get: MethodDefinition<_diffmesh_tensor_v1_GetRequest, _diffmesh_tensor_v1_GetResponse, _diffmesh_tensor_v1_GetRequest__Output, _diffmesh_tensor_v1_GetResponse__Output>
  Put: MethodDefinition<_diffmesh_tensor_v1_PutRequest, _diffmesh_tensor_v1_PutResponse, _diffmesh_tensor_v1_PutRequest__Output, _diffmesh_tensor_v1_PutResponse__Output>
  PutObjects: MethodDefinition<_diffmesh_tensor_v1_PutObjectsRequest, _diffmesh_tensor_v1_PutObjectsResponse, _diffmesh_tensor_v1_PutObjectsRequest__Output, _diffmesh_tensor_v1_PutObjectsResponse__Output>
  Stat: MethodDefinition<_diffmesh_tensor_v1_StatRequest, _diffmesh_tensor_v1_StatResponse, _diffmesh_tensor_v1_StatRequest__Output, _diffmesh_tensor_v1_StatResponse__Output>
  Touch: MethodDefinition<_diffmesh_tensor_v1_TouchRequest, _diffmesh_tensor_v1_TouchResponse, _diffmesh_tensor_v1_TouchRequest__Output, _diffmesh_tensor_v1_TouchResponse__Output>
}
