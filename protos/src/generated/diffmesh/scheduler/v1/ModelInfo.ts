// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { Modality as _diffmesh_scheduler_v1_Modality, Modality__Output as _diffmesh_scheduler_v1_Modality__Output } from '../../../diffmesh/scheduler/v1/Modality.js';
import type { ExecutionPlan as _diffmesh_common_v1_ExecutionPlan, ExecutionPlan__Output as _diffmesh_common_v1_ExecutionPlan__Output } from '../../../diffmesh/common/v1/ExecutionPlan.js';
import type { GenerationParams as _diffmesh_common_v1_GenerationParams, GenerationParams__Output as _diffmesh_common_v1_GenerationParams__Output } from '../../../diffmesh/common/v1/GenerationParams.js';

/**
 * A model in the scheduler's plan registry, and whether the mesh can serve it now.
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
  /**
   * True when every stage of the plan has an instance that can run it now (in
   * its pool, of a version the plan accepts, serving the model, its breaker not
   * open). False: the model is only a registered plan; a request for it fails
   * with UNAVAILABLE (POOL_UNAVAILABLE) until instances come.
   */
  'ready'?: (boolean);
  /**
   * The plan's pools that have no instance able to run it (empty when ready).
   */
  'unavailablePools'?: (string)[];
}

/**
 * A model in the scheduler's plan registry, and whether the mesh can serve it now.
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
  /**
   * True when every stage of the plan has an instance that can run it now (in
   * its pool, of a version the plan accepts, serving the model, its breaker not
   * open). False: the model is only a registered plan; a request for it fails
   * with UNAVAILABLE (POOL_UNAVAILABLE) until instances come.
   */
  'ready': (boolean);
  /**
   * The plan's pools that have no instance able to run it (empty when ready).
   */
  'unavailablePools': (string)[];
}
