// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from '../../../diffmesh/common/v1/ErrorDetail.js';
import type { RequestStatus as _diffmesh_common_v1_RequestStatus, RequestStatus__Output as _diffmesh_common_v1_RequestStatus__Output } from '../../../diffmesh/common/v1/RequestStatus.js';

/**
 * The answer to one SessionRequest.
 */
export interface SessionAnswer {
  'tag'?: (number);
  /**
   * The request the message submitted or cancelled; empty when it was rejected.
   */
  'reqId'?: (string);
  /**
   * Why the message was rejected, with the code and reason the matching call
   * would have failed with.
   */
  'error'?: (_diffmesh_common_v1_ErrorDetail | null);
  /**
   * For `cancel`: the request's status after it.
   */
  'status'?: (_diffmesh_common_v1_RequestStatus);
}

/**
 * The answer to one SessionRequest.
 */
export interface SessionAnswer__Output {
  'tag': (number);
  /**
   * The request the message submitted or cancelled; empty when it was rejected.
   */
  'reqId': (string);
  /**
   * Why the message was rejected, with the code and reason the matching call
   * would have failed with.
   */
  'error': (_diffmesh_common_v1_ErrorDetail__Output | null);
  /**
   * For `cancel`: the request's status after it.
   */
  'status': (_diffmesh_common_v1_RequestStatus__Output);
}
