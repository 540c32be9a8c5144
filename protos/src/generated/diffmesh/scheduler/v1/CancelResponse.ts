// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { RequestStatus as _diffmesh_common_v1_RequestStatus, RequestStatus__Output as _diffmesh_common_v1_RequestStatus__Output } from '../../../diffmesh/common/v1/RequestStatus.js';

export interface CancelResponse {
  /**
   * Status after the call: CANCELLED, or the final status of a request that
   * had already finished.
   */
  'status'?: (_diffmesh_common_v1_RequestStatus);
}

export interface CancelResponse__Output {
  /**
   * Status after the call: CANCELLED, or the final status of a request that
   * had already finished.
   */
  'status': (_diffmesh_common_v1_RequestStatus__Output);
}
