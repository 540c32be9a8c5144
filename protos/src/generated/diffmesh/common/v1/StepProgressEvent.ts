// Original file: proto/diffmesh/common/v1/events.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';

/**
 * Progress inside a stage, e.g. a denoising step.
 */
export interface StepProgressEvent {
  'stageIndex'?: (number);
  'stage'?: (_diffmesh_common_v1_StageName);
  /**
   * Steps done so far, 1..total_steps.
   */
  'step'?: (number);
  'totalSteps'?: (number);
}

/**
 * Progress inside a stage, e.g. a denoising step.
 */
export interface StepProgressEvent__Output {
  'stageIndex': (number);
  'stage': (_diffmesh_common_v1_StageName__Output);
  /**
   * Steps done so far, 1..total_steps.
   */
  'step': (number);
  'totalSteps': (number);
}
