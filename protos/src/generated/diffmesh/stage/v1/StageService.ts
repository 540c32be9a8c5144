// Original file: proto/diffmesh/stage/v1/stage.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { DescribeRequest as _diffmesh_stage_v1_DescribeRequest, DescribeRequest__Output as _diffmesh_stage_v1_DescribeRequest__Output } from '../../../diffmesh/stage/v1/DescribeRequest.js';
import type { DescribeResponse as _diffmesh_stage_v1_DescribeResponse, DescribeResponse__Output as _diffmesh_stage_v1_DescribeResponse__Output } from '../../../diffmesh/stage/v1/DescribeResponse.js';
import type { ExecuteRequest as _diffmesh_stage_v1_ExecuteRequest, ExecuteRequest__Output as _diffmesh_stage_v1_ExecuteRequest__Output } from '../../../diffmesh/stage/v1/ExecuteRequest.js';
import type { ExecuteResponse as _diffmesh_stage_v1_ExecuteResponse, ExecuteResponse__Output as _diffmesh_stage_v1_ExecuteResponse__Output } from '../../../diffmesh/stage/v1/ExecuteResponse.js';
import type { WorkRequest as _diffmesh_stage_v1_WorkRequest, WorkRequest__Output as _diffmesh_stage_v1_WorkRequest__Output } from '../../../diffmesh/stage/v1/WorkRequest.js';
import type { WorkResponse as _diffmesh_stage_v1_WorkResponse, WorkResponse__Output as _diffmesh_stage_v1_WorkResponse__Output } from '../../../diffmesh/stage/v1/WorkResponse.js';

/**
 * Served by every stage instance (encoder, denoiser, VAE decoder). The
 * scheduler dispatches over Work, one long-lived stream per instance; Execute
 * runs one task on its own call (tools, tests, direct use).
 */
export interface StageServiceClient extends grpc.Client {
  /**
   * Describes the instance: stage, pool, models, capacity, version.
   */
  Describe(argument: _diffmesh_stage_v1_DescribeRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_stage_v1_DescribeResponse__Output>): grpc.ClientUnaryCall;
  Describe(argument: _diffmesh_stage_v1_DescribeRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_stage_v1_DescribeResponse__Output>): grpc.ClientUnaryCall;
  Describe(argument: _diffmesh_stage_v1_DescribeRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_stage_v1_DescribeResponse__Output>): grpc.ClientUnaryCall;
  Describe(argument: _diffmesh_stage_v1_DescribeRequest, callback: grpc.requestCallback<_diffmesh_stage_v1_DescribeResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Describes the instance: stage, pool, models, capacity, version.
   */
  describe(argument: _diffmesh_stage_v1_DescribeRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_stage_v1_DescribeResponse__Output>): grpc.ClientUnaryCall;
  describe(argument: _diffmesh_stage_v1_DescribeRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_stage_v1_DescribeResponse__Output>): grpc.ClientUnaryCall;
  describe(argument: _diffmesh_stage_v1_DescribeRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_stage_v1_DescribeResponse__Output>): grpc.ClientUnaryCall;
  describe(argument: _diffmesh_stage_v1_DescribeRequest, callback: grpc.requestCallback<_diffmesh_stage_v1_DescribeResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Runs one task: progress messages, then one result. Failures end the call
   * with a gRPC status carrying google.rpc.Status details.
   */
  Execute(argument: _diffmesh_stage_v1_ExecuteRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_stage_v1_ExecuteResponse__Output>;
  Execute(argument: _diffmesh_stage_v1_ExecuteRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_stage_v1_ExecuteResponse__Output>;
  /**
   * Runs one task: progress messages, then one result. Failures end the call
   * with a gRPC status carrying google.rpc.Status details.
   */
  execute(argument: _diffmesh_stage_v1_ExecuteRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_stage_v1_ExecuteResponse__Output>;
  execute(argument: _diffmesh_stage_v1_ExecuteRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_stage_v1_ExecuteResponse__Output>;
  
  /**
   * The dispatch stream, opened by the scheduler. The scheduler sends
   * assignments and cancellations; the instance answers with its status
   * (first message, then on change), progress, results and failures. The
   * scheduler never assigns more tasks than the instance has free slots.
   */
  Work(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_stage_v1_WorkRequest, _diffmesh_stage_v1_WorkResponse__Output>;
  Work(options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_stage_v1_WorkRequest, _diffmesh_stage_v1_WorkResponse__Output>;
  /**
   * The dispatch stream, opened by the scheduler. The scheduler sends
   * assignments and cancellations; the instance answers with its status
   * (first message, then on change), progress, results and failures. The
   * scheduler never assigns more tasks than the instance has free slots.
   */
  work(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_stage_v1_WorkRequest, _diffmesh_stage_v1_WorkResponse__Output>;
  work(options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_stage_v1_WorkRequest, _diffmesh_stage_v1_WorkResponse__Output>;
  
}

/**
 * Served by every stage instance (encoder, denoiser, VAE decoder). The
 * scheduler dispatches over Work, one long-lived stream per instance; Execute
 * runs one task on its own call (tools, tests, direct use).
 */
export interface StageServiceHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Describes the instance: stage, pool, models, capacity, version.
   */
  Describe: grpc.handleUnaryCall<_diffmesh_stage_v1_DescribeRequest__Output, _diffmesh_stage_v1_DescribeResponse>;
  
  /**
   * Runs one task: progress messages, then one result. Failures end the call
   * with a gRPC status carrying google.rpc.Status details.
   */
  Execute: grpc.handleServerStreamingCall<_diffmesh_stage_v1_ExecuteRequest__Output, _diffmesh_stage_v1_ExecuteResponse>;
  
  /**
   * The dispatch stream, opened by the scheduler. The scheduler sends
   * assignments and cancellations; the instance answers with its status
   * (first message, then on change), progress, results and failures. The
   * scheduler never assigns more tasks than the instance has free slots.
   */
  Work: grpc.handleBidiStreamingCall<_diffmesh_stage_v1_WorkRequest__Output, _diffmesh_stage_v1_WorkResponse>;
  
}

export interface StageServiceDefinition extends grpc.ServiceDefinition {
  Describe: MethodDefinition<_diffmesh_stage_v1_DescribeRequest, _diffmesh_stage_v1_DescribeResponse, _diffmesh_stage_v1_DescribeRequest__Output, _diffmesh_stage_v1_DescribeResponse__Output>
  Execute: MethodDefinition<_diffmesh_stage_v1_ExecuteRequest, _diffmesh_stage_v1_ExecuteResponse, _diffmesh_stage_v1_ExecuteRequest__Output, _diffmesh_stage_v1_ExecuteResponse__Output>
  Work: MethodDefinition<_diffmesh_stage_v1_WorkRequest, _diffmesh_stage_v1_WorkResponse, _diffmesh_stage_v1_WorkRequest__Output, _diffmesh_stage_v1_WorkResponse__Output>
}
