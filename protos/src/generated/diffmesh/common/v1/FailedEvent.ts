// Original file: proto/diffmesh/common/v1/events.proto

import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from '../../../diffmesh/common/v1/ErrorDetail.js';

/**
 * The request failed.
 */
export interface FailedEvent {
  'error'?: (_diffmesh_common_v1_ErrorDetail | null);
}

/**
 * The request failed.
 */
export interface FailedEvent__Output {
  'error': (_diffmesh_common_v1_ErrorDetail__Output | null);
}
