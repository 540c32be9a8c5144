// Original file: proto/diffmesh/common/v1/events.proto

import type { StageTiming as _diffmesh_common_v1_StageTiming, StageTiming__Output as _diffmesh_common_v1_StageTiming__Output } from '../../../diffmesh/common/v1/StageTiming.js';
import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';

/**
 * A stage finished and produced its outputs.
 */
export interface StageFinishedEvent {
  'timing'?: (_diffmesh_common_v1_StageTiming | null);
  'outputs'?: ({[key: string]: _diffmesh_common_v1_ObjectRef});
  /**
   * Things the user should know that did not stop the stage, e.g. a prompt cut
   * to the text encoder's length ("prompt: cut to 77 tokens …").
   */
  'warnings'?: (string)[];
}

/**
 * A stage finished and produced its outputs.
 */
export interface StageFinishedEvent__Output {
  'timing': (_diffmesh_common_v1_StageTiming__Output | null);
  'outputs': ({[key: string]: _diffmesh_common_v1_ObjectRef__Output});
  /**
   * Things the user should know that did not stop the stage, e.g. a prompt cut
   * to the text encoder's length ("prompt: cut to 77 tokens …").
   */
  'warnings': (string)[];
}
