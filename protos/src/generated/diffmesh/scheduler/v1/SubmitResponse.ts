// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { RequestStatus as _diffmesh_common_v1_RequestStatus, RequestStatus__Output as _diffmesh_common_v1_RequestStatus__Output } from '../../../diffmesh/common/v1/RequestStatus.js';

export interface SubmitResponse {
  'reqId'?: (string);
  'status'?: (_diffmesh_common_v1_RequestStatus);
  /**
   * True when `request_id` matched an earlier submission.
   */
  'existing'?: (boolean);
}

export interface SubmitResponse__Output {
  'reqId': (string);
  'status': (_diffmesh_common_v1_RequestStatus__Output);
  /**
   * True when `request_id` matched an earlier submission.
   */
  'existing': (boolean);
}
