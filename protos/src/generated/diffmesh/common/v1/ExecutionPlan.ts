// Original file: proto/diffmesh/common/v1/plan.proto

import type { PlanStage as _diffmesh_common_v1_PlanStage, PlanStage__Output as _diffmesh_common_v1_PlanStage__Output } from '../../../diffmesh/common/v1/PlanStage.js';

/**
 * How a model's request is executed: an ordered list of stages.
 */
export interface ExecutionPlan {
  'model'?: (string);
  'stages'?: (_diffmesh_common_v1_PlanStage)[];
}

/**
 * How a model's request is executed: an ordered list of stages.
 */
export interface ExecutionPlan__Output {
  'model': (string);
  'stages': (_diffmesh_common_v1_PlanStage__Output)[];
}
