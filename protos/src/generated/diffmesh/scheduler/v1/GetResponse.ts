// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { RequestStatus as _diffmesh_common_v1_RequestStatus, RequestStatus__Output as _diffmesh_common_v1_RequestStatus__Output } from '../../../diffmesh/common/v1/RequestStatus.js';
import type { ExecutionPlan as _diffmesh_common_v1_ExecutionPlan, ExecutionPlan__Output as _diffmesh_common_v1_ExecutionPlan__Output } from '../../../diffmesh/common/v1/ExecutionPlan.js';
import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';
import type { StageTiming as _diffmesh_common_v1_StageTiming, StageTiming__Output as _diffmesh_common_v1_StageTiming__Output } from '../../../diffmesh/common/v1/StageTiming.js';
import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';
import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from '../../../diffmesh/common/v1/ErrorDetail.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';

export interface GetResponse {
  'reqId'?: (string);
  'model'?: (string);
  'status'?: (_diffmesh_common_v1_RequestStatus);
  'executionPlan'?: (_diffmesh_common_v1_ExecutionPlan | null);
  /**
   * Index into execution_plan.stages of the stage running or queued next.
   */
  'currentStageIndex'?: (number);
  'currentStage'?: (_diffmesh_common_v1_StageName);
  /**
   * Progress inside the current stage (e.g. the denoising step).
   */
  'step'?: (number);
  'totalSteps'?: (number);
  /**
   * One entry per stage run so far, retries included.
   */
  'timings'?: (_diffmesh_common_v1_StageTiming)[];
  /**
   * Set when status is COMPLETED.
   */
  'results'?: (_diffmesh_common_v1_ObjectRef)[];
  'mediaType'?: (string);
  /**
   * Set when status is FAILED.
   */
  'error'?: (_diffmesh_common_v1_ErrorDetail | null);
  'createdAt'?: (_google_protobuf_Timestamp | null);
  'updatedAt'?: (_google_protobuf_Timestamp | null);
}

export interface GetResponse__Output {
  'reqId': (string);
  'model': (string);
  'status': (_diffmesh_common_v1_RequestStatus__Output);
  'executionPlan': (_diffmesh_common_v1_ExecutionPlan__Output | null);
  /**
   * Index into execution_plan.stages of the stage running or queued next.
   */
  'currentStageIndex': (number);
  'currentStage': (_diffmesh_common_v1_StageName__Output);
  /**
   * Progress inside the current stage (e.g. the denoising step).
   */
  'step': (number);
  'totalSteps': (number);
  /**
   * One entry per stage run so far, retries included.
   */
  'timings': (_diffmesh_common_v1_StageTiming__Output)[];
  /**
   * Set when status is COMPLETED.
   */
  'results': (_diffmesh_common_v1_ObjectRef__Output)[];
  'mediaType': (string);
  /**
   * Set when status is FAILED.
   */
  'error': (_diffmesh_common_v1_ErrorDetail__Output | null);
  'createdAt': (_google_protobuf_Timestamp__Output | null);
  'updatedAt': (_google_protobuf_Timestamp__Output | null);
}
