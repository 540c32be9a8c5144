// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { ModelInfo as _diffmesh_scheduler_v1_ModelInfo, ModelInfo__Output as _diffmesh_scheduler_v1_ModelInfo__Output } from '../../../diffmesh/scheduler/v1/ModelInfo.js';

export interface ListModelsResponse {
  'models'?: (_diffmesh_scheduler_v1_ModelInfo)[];
}

export interface ListModelsResponse__Output {
  'models': (_diffmesh_scheduler_v1_ModelInfo__Output)[];
}
