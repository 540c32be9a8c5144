// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { Modality as _diffmesh_scheduler_v1_Modality, Modality__Output as _diffmesh_scheduler_v1_Modality__Output } from '../../../diffmesh/scheduler/v1/Modality.js';
import type { ExecutionPlan as _diffmesh_common_v1_ExecutionPlan, ExecutionPlan__Output as _diffmesh_common_v1_ExecutionPlan__Output } from '../../../diffmesh/common/v1/ExecutionPlan.js';
import type { GenerationParams as _diffmesh_common_v1_GenerationParams, GenerationParams__Output as _diffmesh_common_v1_GenerationParams__Output } from '../../../diffmesh/common/v1/GenerationParams.js';

/**
 * A model the scheduler can serve.
 */
export interface ModelInfo {
  /**
   * The model name, or a pattern when `pattern` is set.
   */
  'name'?: (string);
  /**
   * True when `name` is a pattern that matches several model names.
   */
  'pattern'?: (boolean);
  'modalities'?: (_diffmesh_scheduler_v1_Modality)[];
  'plan'?: (_diffmesh_common_v1_ExecutionPlan | null);
  /**
   * Values used for parameters a request leaves unset.
   */
  'defaults'?: (_diffmesh_common_v1_GenerationParams | null);
}

/**
 * A model the scheduler can serve.
 */
export interface ModelInfo__Output {
  /**
   * The model name, or a pattern when `pattern` is set.
   */
  'name': (string);
  /**
   * True when `name` is a pattern that matches several model names.
   */
  'pattern': (boolean);
  'modalities': (_diffmesh_scheduler_v1_Modality__Output)[];
  'plan': (_diffmesh_common_v1_ExecutionPlan__Output | null);
  /**
   * Values used for parameters a request leaves unset.
   */
  'defaults': (_diffmesh_common_v1_GenerationParams__Output | null);
}
