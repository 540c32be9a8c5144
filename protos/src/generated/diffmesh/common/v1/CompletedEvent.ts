// Original file: proto/diffmesh/common/v1/events.proto

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';
import type { StageTiming as _diffmesh_common_v1_StageTiming, StageTiming__Output as _diffmesh_common_v1_StageTiming__Output } from '../../../diffmesh/common/v1/StageTiming.js';

/**
 * The request completed; `results` hold the output (decoded pixels).
 */
export interface CompletedEvent {
  'results'?: (_diffmesh_common_v1_ObjectRef)[];
  /**
   * How the result is meant to be delivered, e.g. `image/png`, `video/mp4`.
   */
  'mediaType'?: (string);
  'timings'?: (_diffmesh_common_v1_StageTiming)[];
}

/**
 * The request completed; `results` hold the output (decoded pixels).
 */
export interface CompletedEvent__Output {
  'results': (_diffmesh_common_v1_ObjectRef__Output)[];
  /**
   * How the result is meant to be delivered, e.g. `image/png`, `video/mp4`.
   */
  'mediaType': (string);
  'timings': (_diffmesh_common_v1_StageTiming__Output)[];
}
