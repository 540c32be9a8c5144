// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { CancelRequest as _diffmesh_scheduler_v1_CancelRequest, CancelRequest__Output as _diffmesh_scheduler_v1_CancelRequest__Output } from '../../../diffmesh/scheduler/v1/CancelRequest.js';
import type { CancelResponse as _diffmesh_scheduler_v1_CancelResponse, CancelResponse__Output as _diffmesh_scheduler_v1_CancelResponse__Output } from '../../../diffmesh/scheduler/v1/CancelResponse.js';
import type { GenerateRequest as _diffmesh_scheduler_v1_GenerateRequest, GenerateRequest__Output as _diffmesh_scheduler_v1_GenerateRequest__Output } from '../../../diffmesh/scheduler/v1/GenerateRequest.js';
import type { GenerateResponse as _diffmesh_scheduler_v1_GenerateResponse, GenerateResponse__Output as _diffmesh_scheduler_v1_GenerateResponse__Output } from '../../../diffmesh/scheduler/v1/GenerateResponse.js';
import type { GetRequest as _diffmesh_scheduler_v1_GetRequest, GetRequest__Output as _diffmesh_scheduler_v1_GetRequest__Output } from '../../../diffmesh/scheduler/v1/GetRequest.js';
import type { GetResponse as _diffmesh_scheduler_v1_GetResponse, GetResponse__Output as _diffmesh_scheduler_v1_GetResponse__Output } from '../../../diffmesh/scheduler/v1/GetResponse.js';
import type { GetResultRequest as _diffmesh_scheduler_v1_GetResultRequest, GetResultRequest__Output as _diffmesh_scheduler_v1_GetResultRequest__Output } from '../../../diffmesh/scheduler/v1/GetResultRequest.js';
import type { GetResultResponse as _diffmesh_scheduler_v1_GetResultResponse, GetResultResponse__Output as _diffmesh_scheduler_v1_GetResultResponse__Output } from '../../../diffmesh/scheduler/v1/GetResultResponse.js';
import type { GetStatusRequest as _diffmesh_scheduler_v1_GetStatusRequest, GetStatusRequest__Output as _diffmesh_scheduler_v1_GetStatusRequest__Output } from '../../../diffmesh/scheduler/v1/GetStatusRequest.js';
import type { GetStatusResponse as _diffmesh_scheduler_v1_GetStatusResponse, GetStatusResponse__Output as _diffmesh_scheduler_v1_GetStatusResponse__Output } from '../../../diffmesh/scheduler/v1/GetStatusResponse.js';
import type { ListModelsRequest as _diffmesh_scheduler_v1_ListModelsRequest, ListModelsRequest__Output as _diffmesh_scheduler_v1_ListModelsRequest__Output } from '../../../diffmesh/scheduler/v1/ListModelsRequest.js';
import type { ListModelsResponse as _diffmesh_scheduler_v1_ListModelsResponse, ListModelsResponse__Output as _diffmesh_scheduler_v1_ListModelsResponse__Output } from '../../../diffmesh/scheduler/v1/ListModelsResponse.js';
import type { SessionRequest as _diffmesh_scheduler_v1_SessionRequest, SessionRequest__Output as _diffmesh_scheduler_v1_SessionRequest__Output } from '../../../diffmesh/scheduler/v1/SessionRequest.js';
import type { SessionResponse as _diffmesh_scheduler_v1_SessionResponse, SessionResponse__Output as _diffmesh_scheduler_v1_SessionResponse__Output } from '../../../diffmesh/scheduler/v1/SessionResponse.js';
import type { SubmitRequest as _diffmesh_scheduler_v1_SubmitRequest, SubmitRequest__Output as _diffmesh_scheduler_v1_SubmitRequest__Output } from '../../../diffmesh/scheduler/v1/SubmitRequest.js';
import type { SubmitResponse as _diffmesh_scheduler_v1_SubmitResponse, SubmitResponse__Output as _diffmesh_scheduler_v1_SubmitResponse__Output } from '../../../diffmesh/scheduler/v1/SubmitResponse.js';
import type { WatchRequest as _diffmesh_scheduler_v1_WatchRequest, WatchRequest__Output as _diffmesh_scheduler_v1_WatchRequest__Output } from '../../../diffmesh/scheduler/v1/WatchRequest.js';
import type { WatchResponse as _diffmesh_scheduler_v1_WatchResponse, WatchResponse__Output as _diffmesh_scheduler_v1_WatchResponse__Output } from '../../../diffmesh/scheduler/v1/WatchResponse.js';

/**
 * The public entry point of diffmesh: accepts generation requests, runs them
 * through their model's execution plan and reports their progress.
 * 
 * HTTP paths live under `/api/v1/`; `/v1/` is left to the OpenAI-compatible
 * endpoints of the gateway.
 */
export interface SchedulerServiceClient extends grpc.Client {
  /**
   * Cancels a request; cancelling a finished request changes nothing.
   */
  Cancel(argument: _diffmesh_scheduler_v1_CancelRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_CancelResponse__Output>): grpc.ClientUnaryCall;
  Cancel(argument: _diffmesh_scheduler_v1_CancelRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_CancelResponse__Output>): grpc.ClientUnaryCall;
  Cancel(argument: _diffmesh_scheduler_v1_CancelRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_CancelResponse__Output>): grpc.ClientUnaryCall;
  Cancel(argument: _diffmesh_scheduler_v1_CancelRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_CancelResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Cancels a request; cancelling a finished request changes nothing.
   */
  cancel(argument: _diffmesh_scheduler_v1_CancelRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_CancelResponse__Output>): grpc.ClientUnaryCall;
  cancel(argument: _diffmesh_scheduler_v1_CancelRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_CancelResponse__Output>): grpc.ClientUnaryCall;
  cancel(argument: _diffmesh_scheduler_v1_CancelRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_CancelResponse__Output>): grpc.ClientUnaryCall;
  cancel(argument: _diffmesh_scheduler_v1_CancelRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_CancelResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Submits a request and streams its events until it completes, fails or is
   * cancelled. Cancelling the call cancels the request.
   */
  Generate(argument: _diffmesh_scheduler_v1_GenerateRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_GenerateResponse__Output>;
  Generate(argument: _diffmesh_scheduler_v1_GenerateRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_GenerateResponse__Output>;
  /**
   * Submits a request and streams its events until it completes, fails or is
   * cancelled. Cancelling the call cancels the request.
   */
  generate(argument: _diffmesh_scheduler_v1_GenerateRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_GenerateResponse__Output>;
  generate(argument: _diffmesh_scheduler_v1_GenerateRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_GenerateResponse__Output>;
  
  /**
   * Returns the state of a request.
   */
  Get(argument: _diffmesh_scheduler_v1_GetRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetResponse__Output>): grpc.ClientUnaryCall;
  Get(argument: _diffmesh_scheduler_v1_GetRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetResponse__Output>): grpc.ClientUnaryCall;
  Get(argument: _diffmesh_scheduler_v1_GetRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetResponse__Output>): grpc.ClientUnaryCall;
  Get(argument: _diffmesh_scheduler_v1_GetRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Returns the state of a request.
   */
  get(argument: _diffmesh_scheduler_v1_GetRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetResponse__Output>): grpc.ClientUnaryCall;
  get(argument: _diffmesh_scheduler_v1_GetRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetResponse__Output>): grpc.ClientUnaryCall;
  get(argument: _diffmesh_scheduler_v1_GetRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetResponse__Output>): grpc.ClientUnaryCall;
  get(argument: _diffmesh_scheduler_v1_GetRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * The result of a completed request as a file: PNG, JPEG or WebP for a
   * picture; MP4 (H.264), WebM (VP9), GIF or APNG for a video. The first message
   * is a header (media type, size in bytes, format, size in pixels, frames); the
   * encoded bytes follow in chunks. An unknown id is NOT_FOUND; a request that is
   * still running, failed or was cancelled is FAILED_PRECONDITION
   * (REQUEST_NOT_FINISHED); a format the result cannot take is INVALID_ARGUMENT
   * naming `format`. Over HTTP the gateway answers with the file itself.
   */
  GetResult(argument: _diffmesh_scheduler_v1_GetResultRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_GetResultResponse__Output>;
  GetResult(argument: _diffmesh_scheduler_v1_GetResultRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_GetResultResponse__Output>;
  /**
   * The result of a completed request as a file: PNG, JPEG or WebP for a
   * picture; MP4 (H.264), WebM (VP9), GIF or APNG for a video. The first message
   * is a header (media type, size in bytes, format, size in pixels, frames); the
   * encoded bytes follow in chunks. An unknown id is NOT_FOUND; a request that is
   * still running, failed or was cancelled is FAILED_PRECONDITION
   * (REQUEST_NOT_FINISHED); a format the result cannot take is INVALID_ARGUMENT
   * naming `format`. Over HTTP the gateway answers with the file itself.
   */
  getResult(argument: _diffmesh_scheduler_v1_GetResultRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_GetResultResponse__Output>;
  getResult(argument: _diffmesh_scheduler_v1_GetResultRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_GetResultResponse__Output>;
  
  /**
   * Returns what this scheduler sees: its pools with their stage instances and
   * queue depths, and its most recent requests with their stage timings.
   */
  GetStatus(argument: _diffmesh_scheduler_v1_GetStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _diffmesh_scheduler_v1_GetStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _diffmesh_scheduler_v1_GetStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _diffmesh_scheduler_v1_GetStatusRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Returns what this scheduler sees: its pools with their stage instances and
   * queue depths, and its most recent requests with their stage timings.
   */
  getStatus(argument: _diffmesh_scheduler_v1_GetStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _diffmesh_scheduler_v1_GetStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _diffmesh_scheduler_v1_GetStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _diffmesh_scheduler_v1_GetStatusRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Lists the models this scheduler can serve.
   */
  ListModels(argument: _diffmesh_scheduler_v1_ListModelsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_ListModelsResponse__Output>): grpc.ClientUnaryCall;
  ListModels(argument: _diffmesh_scheduler_v1_ListModelsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_ListModelsResponse__Output>): grpc.ClientUnaryCall;
  ListModels(argument: _diffmesh_scheduler_v1_ListModelsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_ListModelsResponse__Output>): grpc.ClientUnaryCall;
  ListModels(argument: _diffmesh_scheduler_v1_ListModelsRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_ListModelsResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Lists the models this scheduler can serve.
   */
  listModels(argument: _diffmesh_scheduler_v1_ListModelsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_ListModelsResponse__Output>): grpc.ClientUnaryCall;
  listModels(argument: _diffmesh_scheduler_v1_ListModelsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_ListModelsResponse__Output>): grpc.ClientUnaryCall;
  listModels(argument: _diffmesh_scheduler_v1_ListModelsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_ListModelsResponse__Output>): grpc.ClientUnaryCall;
  listModels(argument: _diffmesh_scheduler_v1_ListModelsRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_ListModelsResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Carries many requests on one long-lived stream, for clients that send many
   * (such as the gateway): a `generate` message submits a request and a `cancel`
   * message cancels one, each answered in the responses by its `tag`; the
   * responses then carry the events of every accepted request as they happen. A
   * request costs a message instead of a call. A rejected request (full queue,
   * bad parameters) is answered with its error and the stream goes on. When the
   * client closes its side the stream ends after its last request; when the
   * client goes away its unfinished requests are cancelled.
   */
  Session(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_scheduler_v1_SessionRequest, _diffmesh_scheduler_v1_SessionResponse__Output>;
  Session(options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_scheduler_v1_SessionRequest, _diffmesh_scheduler_v1_SessionResponse__Output>;
  /**
   * Carries many requests on one long-lived stream, for clients that send many
   * (such as the gateway): a `generate` message submits a request and a `cancel`
   * message cancels one, each answered in the responses by its `tag`; the
   * responses then carry the events of every accepted request as they happen. A
   * request costs a message instead of a call. A rejected request (full queue,
   * bad parameters) is answered with its error and the stream goes on. When the
   * client closes its side the stream ends after its last request; when the
   * client goes away its unfinished requests are cancelled.
   */
  session(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_scheduler_v1_SessionRequest, _diffmesh_scheduler_v1_SessionResponse__Output>;
  session(options?: grpc.CallOptions): grpc.ClientDuplexStream<_diffmesh_scheduler_v1_SessionRequest, _diffmesh_scheduler_v1_SessionResponse__Output>;
  
  /**
   * Submits a request and returns its id at once. A full queue or an
   * unavailable pool answers RESOURCE_EXHAUSTED / UNAVAILABLE; nothing is
   * half-accepted.
   */
  Submit(argument: _diffmesh_scheduler_v1_SubmitRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_SubmitResponse__Output>): grpc.ClientUnaryCall;
  Submit(argument: _diffmesh_scheduler_v1_SubmitRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_SubmitResponse__Output>): grpc.ClientUnaryCall;
  Submit(argument: _diffmesh_scheduler_v1_SubmitRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_SubmitResponse__Output>): grpc.ClientUnaryCall;
  Submit(argument: _diffmesh_scheduler_v1_SubmitRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_SubmitResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Submits a request and returns its id at once. A full queue or an
   * unavailable pool answers RESOURCE_EXHAUSTED / UNAVAILABLE; nothing is
   * half-accepted.
   */
  submit(argument: _diffmesh_scheduler_v1_SubmitRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_SubmitResponse__Output>): grpc.ClientUnaryCall;
  submit(argument: _diffmesh_scheduler_v1_SubmitRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_diffmesh_scheduler_v1_SubmitResponse__Output>): grpc.ClientUnaryCall;
  submit(argument: _diffmesh_scheduler_v1_SubmitRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_diffmesh_scheduler_v1_SubmitResponse__Output>): grpc.ClientUnaryCall;
  submit(argument: _diffmesh_scheduler_v1_SubmitRequest, callback: grpc.requestCallback<_diffmesh_scheduler_v1_SubmitResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Streams the events of an existing request: every event so far (or those
   * after `after_sequence`), then live ones until it ends. For a finished
   * request it sends them and ends. Any scheduler sharing the request store
   * answers for any request.
   */
  Watch(argument: _diffmesh_scheduler_v1_WatchRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_WatchResponse__Output>;
  Watch(argument: _diffmesh_scheduler_v1_WatchRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_WatchResponse__Output>;
  /**
   * Streams the events of an existing request: every event so far (or those
   * after `after_sequence`), then live ones until it ends. For a finished
   * request it sends them and ends. Any scheduler sharing the request store
   * answers for any request.
   */
  watch(argument: _diffmesh_scheduler_v1_WatchRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_WatchResponse__Output>;
  watch(argument: _diffmesh_scheduler_v1_WatchRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_diffmesh_scheduler_v1_WatchResponse__Output>;
  
}

/**
 * The public entry point of diffmesh: accepts generation requests, runs them
 * through their model's execution plan and reports their progress.
 * 
 * HTTP paths live under `/api/v1/`; `/v1/` is left to the OpenAI-compatible
 * endpoints of the gateway.
 */
export interface SchedulerServiceHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Cancels a request; cancelling a finished request changes nothing.
   */
  Cancel: grpc.handleUnaryCall<_diffmesh_scheduler_v1_CancelRequest__Output, _diffmesh_scheduler_v1_CancelResponse>;
  
  /**
   * Submits a request and streams its events until it completes, fails or is
   * cancelled. Cancelling the call cancels the request.
   */
  Generate: grpc.handleServerStreamingCall<_diffmesh_scheduler_v1_GenerateRequest__Output, _diffmesh_scheduler_v1_GenerateResponse>;
  
  /**
   * Returns the state of a request.
   */
  Get: grpc.handleUnaryCall<_diffmesh_scheduler_v1_GetRequest__Output, _diffmesh_scheduler_v1_GetResponse>;
  
  /**
   * The result of a completed request as a file: PNG, JPEG or WebP for a
   * picture; MP4 (H.264), WebM (VP9), GIF or APNG for a video. The first message
   * is a header (media type, size in bytes, format, size in pixels, frames); the
   * encoded bytes follow in chunks. An unknown id is NOT_FOUND; a request that is
   * still running, failed or was cancelled is FAILED_PRECONDITION
   * (REQUEST_NOT_FINISHED); a format the result cannot take is INVALID_ARGUMENT
   * naming `format`. Over HTTP the gateway answers with the file itself.
   */
  GetResult: grpc.handleServerStreamingCall<_diffmesh_scheduler_v1_GetResultRequest__Output, _diffmesh_scheduler_v1_GetResultResponse>;
  
  /**
   * Returns what this scheduler sees: its pools with their stage instances and
   * queue depths, and its most recent requests with their stage timings.
   */
  GetStatus: grpc.handleUnaryCall<_diffmesh_scheduler_v1_GetStatusRequest__Output, _diffmesh_scheduler_v1_GetStatusResponse>;
  
  /**
   * Lists the models this scheduler can serve.
   */
  ListModels: grpc.handleUnaryCall<_diffmesh_scheduler_v1_ListModelsRequest__Output, _diffmesh_scheduler_v1_ListModelsResponse>;
  
  /**
   * Carries many requests on one long-lived stream, for clients that send many
   * (such as the gateway): a `generate` message submits a request and a `cancel`
   * message cancels one, each answered in the responses by its `tag`; the
   * responses then carry the events of every accepted request as they happen. A
   * request costs a message instead of a call. A rejected request (full queue,
   * bad parameters) is answered with its error and the stream goes on. When the
   * client closes its side the stream ends after its last request; when the
   * client goes away its unfinished requests are cancelled.
   */
  Session: grpc.handleBidiStreamingCall<_diffmesh_scheduler_v1_SessionRequest__Output, _diffmesh_scheduler_v1_SessionResponse>;
  
  /**
   * Submits a request and returns its id at once. A full queue or an
   * unavailable pool answers RESOURCE_EXHAUSTED / UNAVAILABLE; nothing is
   * half-accepted.
   */
  Submit: grpc.handleUnaryCall<_diffmesh_scheduler_v1_SubmitRequest__Output, _diffmesh_scheduler_v1_SubmitResponse>;
  
  /**
   * Streams the events of an existing request: every event so far (or those
   * after `after_sequence`), then live ones until it ends. For a finished
   * request it sends them and ends. Any scheduler sharing the request store
   * answers for any request.
   */
  Watch: grpc.handleServerStreamingCall<_diffmesh_scheduler_v1_WatchRequest__Output, _diffmesh_scheduler_v1_WatchResponse>;
  
}

export interface SchedulerServiceDefinition extends grpc.ServiceDefinition {
  Cancel: MethodDefinition<_diffmesh_scheduler_v1_CancelRequest, _diffmesh_scheduler_v1_CancelResponse, _diffmesh_scheduler_v1_CancelRequest__Output, _diffmesh_scheduler_v1_CancelResponse__Output>
  Generate: MethodDefinition<_diffmesh_scheduler_v1_GenerateRequest, _diffmesh_scheduler_v1_GenerateResponse, _diffmesh_scheduler_v1_GenerateRequest__Output, _diffmesh_scheduler_v1_GenerateResponse__Output>
  Get: MethodDefinition<_diffmesh_scheduler_v1_GetRequest, _diffmesh_scheduler_v1_GetResponse, _diffmesh_scheduler_v1_GetRequest__Output, _diffmesh_scheduler_v1_GetResponse__Output>
  GetResult: MethodDefinition<_diffmesh_scheduler_v1_GetResultRequest, _diffmesh_scheduler_v1_GetResultResponse, _diffmesh_scheduler_v1_GetResultRequest__Output, _diffmesh_scheduler_v1_GetResultResponse__Output>
  GetStatus: MethodDefinition<_diffmesh_scheduler_v1_GetStatusRequest, _diffmesh_scheduler_v1_GetStatusResponse, _diffmesh_scheduler_v1_GetStatusRequest__Output, _diffmesh_scheduler_v1_GetStatusResponse__Output>
  ListModels: MethodDefinition<_diffmesh_scheduler_v1_ListModelsRequest, _diffmesh_scheduler_v1_ListModelsResponse, _diffmesh_scheduler_v1_ListModelsRequest__Output, _diffmesh_scheduler_v1_ListModelsResponse__Output>
  Session: MethodDefinition<_diffmesh_scheduler_v1_SessionRequest, _diffmesh_scheduler_v1_SessionResponse, _diffmesh_scheduler_v1_SessionRequest__Output, _diffmesh_scheduler_v1_SessionResponse__Output>
  Submit: MethodDefinition<_diffmesh_scheduler_v1_SubmitRequest, _diffmesh_scheduler_v1_SubmitResponse, _diffmesh_scheduler_v1_SubmitRequest__Output, _diffmesh_scheduler_v1_SubmitResponse__Output>
  Watch: MethodDefinition<_diffmesh_scheduler_v1_WatchRequest, _diffmesh_scheduler_v1_WatchResponse, _diffmesh_scheduler_v1_WatchRequest__Output, _diffmesh_scheduler_v1_WatchResponse__Output>
}
