// Original file: proto/diffmesh/stage/v1/stage.proto

import type { TaskProgress as _diffmesh_stage_v1_TaskProgress, TaskProgress__Output as _diffmesh_stage_v1_TaskProgress__Output } from '../../../diffmesh/stage/v1/TaskProgress.js';
import type { TaskResult as _diffmesh_stage_v1_TaskResult, TaskResult__Output as _diffmesh_stage_v1_TaskResult__Output } from '../../../diffmesh/stage/v1/TaskResult.js';

export interface ExecuteResponse {
  'progress'?: (_diffmesh_stage_v1_TaskProgress | null);
  'result'?: (_diffmesh_stage_v1_TaskResult | null);
  'kind'?: "progress"|"result";
}

export interface ExecuteResponse__Output {
  'progress'?: (_diffmesh_stage_v1_TaskProgress__Output | null);
  'result'?: (_diffmesh_stage_v1_TaskResult__Output | null);
  'kind'?: "progress"|"result";
}
