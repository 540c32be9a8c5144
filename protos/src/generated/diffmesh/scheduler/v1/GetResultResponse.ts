// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { ResultHeader as _diffmesh_scheduler_v1_ResultHeader, ResultHeader__Output as _diffmesh_scheduler_v1_ResultHeader__Output } from '../../../diffmesh/scheduler/v1/ResultHeader.js';

export interface GetResultResponse {
  'header'?: (_diffmesh_scheduler_v1_ResultHeader | null);
  /**
   * The next piece of the encoded file, in order.
   */
  'chunk'?: (Buffer | Uint8Array | string);
  'part'?: "header"|"chunk";
}

export interface GetResultResponse__Output {
  'header'?: (_diffmesh_scheduler_v1_ResultHeader__Output | null);
  /**
   * The next piece of the encoded file, in order.
   */
  'chunk'?: (Buffer);
  'part'?: "header"|"chunk";
}
