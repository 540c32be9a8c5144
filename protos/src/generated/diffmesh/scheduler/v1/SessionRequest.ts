// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { GenerateRequest as _diffmesh_scheduler_v1_GenerateRequest, GenerateRequest__Output as _diffmesh_scheduler_v1_GenerateRequest__Output } from '../../../diffmesh/scheduler/v1/GenerateRequest.js';
import type { CancelRequest as _diffmesh_scheduler_v1_CancelRequest, CancelRequest__Output as _diffmesh_scheduler_v1_CancelRequest__Output } from '../../../diffmesh/scheduler/v1/CancelRequest.js';

/**
 * One message from a Session's client.
 */
export interface SessionRequest {
  /**
   * Chosen by the client and echoed in the answer; a tag must not be reused
   * while its message is unanswered.
   */
  'tag'?: (number);
  /**
   * Submits a request, as Generate does.
   */
  'generate'?: (_diffmesh_scheduler_v1_GenerateRequest | null);
  /**
   * Cancels a request (of this session or not), as Cancel does.
   */
  'cancel'?: (_diffmesh_scheduler_v1_CancelRequest | null);
  /**
   * W3C trace context (`traceparent`, `tracestate`) of the client's span for
   * this request; when empty, the stream's metadata's is used.
   */
  'traceContext'?: ({[key: string]: string});
  'action'?: "generate"|"cancel";
}

/**
 * One message from a Session's client.
 */
export interface SessionRequest__Output {
  /**
   * Chosen by the client and echoed in the answer; a tag must not be reused
   * while its message is unanswered.
   */
  'tag': (number);
  /**
   * Submits a request, as Generate does.
   */
  'generate'?: (_diffmesh_scheduler_v1_GenerateRequest__Output | null);
  /**
   * Cancels a request (of this session or not), as Cancel does.
   */
  'cancel'?: (_diffmesh_scheduler_v1_CancelRequest__Output | null);
  /**
   * W3C trace context (`traceparent`, `tracestate`) of the client's span for
   * this request; when empty, the stream's metadata's is used.
   */
  'traceContext': ({[key: string]: string});
  'action'?: "generate"|"cancel";
}
