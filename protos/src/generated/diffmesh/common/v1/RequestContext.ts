// Original file: proto/diffmesh/common/v1/request.proto

import type { GenerationParams as _diffmesh_common_v1_GenerationParams, GenerationParams__Output as _diffmesh_common_v1_GenerationParams__Output } from '../../../diffmesh/common/v1/GenerationParams.js';
import type { ExecutionPlan as _diffmesh_common_v1_ExecutionPlan, ExecutionPlan__Output as _diffmesh_common_v1_ExecutionPlan__Output } from '../../../diffmesh/common/v1/ExecutionPlan.js';
import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';
import type { RequestStatus as _diffmesh_common_v1_RequestStatus, RequestStatus__Output as _diffmesh_common_v1_RequestStatus__Output } from '../../../diffmesh/common/v1/RequestStatus.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';
import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from '../../../diffmesh/common/v1/ErrorDetail.js';

/**
 * The state of one generation request as it moves through its plan.
 */
export interface RequestContext {
  'reqId'?: (string);
  'model'?: (string);
  'params'?: (_diffmesh_common_v1_GenerationParams | null);
  'executionPlan'?: (_diffmesh_common_v1_ExecutionPlan | null);
  /**
   * Index into execution_plan.stages of the stage running or queued next.
   */
  'currentStageIndex'?: (number);
  /**
   * Named objects produced so far (name -> ref).
   */
  'refs'?: ({[key: string]: _diffmesh_common_v1_ObjectRef});
  'status'?: (_diffmesh_common_v1_RequestStatus);
  'createdAt'?: (_google_protobuf_Timestamp | null);
  'updatedAt'?: (_google_protobuf_Timestamp | null);
  /**
   * Larger runs first.
   */
  'priority'?: (number);
  /**
   * Request timeout in milliseconds; 0 = none.
   */
  'timeoutMs'?: (number);
  'retryCount'?: (number);
  /**
   * Set when status is FAILED (or CANCELLED with a reason).
   */
  'error'?: (_diffmesh_common_v1_ErrorDetail | null);
  /**
   * W3C trace context (`traceparent`, `tracestate`).
   */
  'traceContext'?: ({[key: string]: string});
  /**
   * The tenant the request belongs to (`default` when the mesh has no tenants).
   */
  'tenant'?: (string);
  /**
   * When the request must be done by (absent = no deadline). Within a
   * priority, the earliest deadline runs first.
   */
  'deadline'?: (_google_protobuf_Timestamp | null);
}

/**
 * The state of one generation request as it moves through its plan.
 */
export interface RequestContext__Output {
  'reqId': (string);
  'model': (string);
  'params': (_diffmesh_common_v1_GenerationParams__Output | null);
  'executionPlan': (_diffmesh_common_v1_ExecutionPlan__Output | null);
  /**
   * Index into execution_plan.stages of the stage running or queued next.
   */
  'currentStageIndex': (number);
  /**
   * Named objects produced so far (name -> ref).
   */
  'refs': ({[key: string]: _diffmesh_common_v1_ObjectRef__Output});
  'status': (_diffmesh_common_v1_RequestStatus__Output);
  'createdAt': (_google_protobuf_Timestamp__Output | null);
  'updatedAt': (_google_protobuf_Timestamp__Output | null);
  /**
   * Larger runs first.
   */
  'priority': (number);
  /**
   * Request timeout in milliseconds; 0 = none.
   */
  'timeoutMs': (number);
  'retryCount': (number);
  /**
   * Set when status is FAILED (or CANCELLED with a reason).
   */
  'error': (_diffmesh_common_v1_ErrorDetail__Output | null);
  /**
   * W3C trace context (`traceparent`, `tracestate`).
   */
  'traceContext': ({[key: string]: string});
  /**
   * The tenant the request belongs to (`default` when the mesh has no tenants).
   */
  'tenant': (string);
  /**
   * When the request must be done by (absent = no deadline). Within a
   * priority, the earliest deadline runs first.
   */
  'deadline': (_google_protobuf_Timestamp__Output | null);
}
