// Original file: proto/diffmesh/stage/v1/stage.proto

import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from '../../../diffmesh/common/v1/ErrorDetail.js';

/**
 * A task failed.
 */
export interface TaskFailed {
  'reqId'?: (string);
  'stageIndex'?: (number);
  'attempt'?: (number);
  'error'?: (_diffmesh_common_v1_ErrorDetail | null);
}

/**
 * A task failed.
 */
export interface TaskFailed__Output {
  'reqId': (string);
  'stageIndex': (number);
  'attempt': (number);
  'error': (_diffmesh_common_v1_ErrorDetail__Output | null);
}
