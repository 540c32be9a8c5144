// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { RequestStatus as _diffmesh_common_v1_RequestStatus, RequestStatus__Output as _diffmesh_common_v1_RequestStatus__Output } from '../../../diffmesh/common/v1/RequestStatus.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';
import type { StageTiming as _diffmesh_common_v1_StageTiming, StageTiming__Output as _diffmesh_common_v1_StageTiming__Output } from '../../../diffmesh/common/v1/StageTiming.js';
import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from '../../../diffmesh/common/v1/ErrorDetail.js';

/**
 * A summary of a recent request.
 */
export interface RecentRequest {
  'reqId'?: (string);
  'model'?: (string);
  'status'?: (_diffmesh_common_v1_RequestStatus);
  'createdAt'?: (_google_protobuf_Timestamp | null);
  /**
   * The last change; the end time of a finished request.
   */
  'updatedAt'?: (_google_protobuf_Timestamp | null);
  /**
   * One entry per stage run so far.
   */
  'timings'?: (_diffmesh_common_v1_StageTiming)[];
  /**
   * The prompt, cut to its first 200 characters.
   */
  'prompt'?: (string);
  /**
   * Progress inside the current stage.
   */
  'step'?: (number);
  'totalSteps'?: (number);
  /**
   * Set when status is FAILED.
   */
  'error'?: (_diffmesh_common_v1_ErrorDetail | null);
}

/**
 * A summary of a recent request.
 */
export interface RecentRequest__Output {
  'reqId': (string);
  'model': (string);
  'status': (_diffmesh_common_v1_RequestStatus__Output);
  'createdAt': (_google_protobuf_Timestamp__Output | null);
  /**
   * The last change; the end time of a finished request.
   */
  'updatedAt': (_google_protobuf_Timestamp__Output | null);
  /**
   * One entry per stage run so far.
   */
  'timings': (_diffmesh_common_v1_StageTiming__Output)[];
  /**
   * The prompt, cut to its first 200 characters.
   */
  'prompt': (string);
  /**
   * Progress inside the current stage.
   */
  'step': (number);
  'totalSteps': (number);
  /**
   * Set when status is FAILED.
   */
  'error': (_diffmesh_common_v1_ErrorDetail__Output | null);
}
