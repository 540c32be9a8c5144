// Original file: proto/diffmesh/stage/v1/stage.proto

import type { InstanceStatus as _diffmesh_stage_v1_InstanceStatus, InstanceStatus__Output as _diffmesh_stage_v1_InstanceStatus__Output } from '../../../diffmesh/stage/v1/InstanceStatus.js';
import type { TaskProgress as _diffmesh_stage_v1_TaskProgress, TaskProgress__Output as _diffmesh_stage_v1_TaskProgress__Output } from '../../../diffmesh/stage/v1/TaskProgress.js';
import type { TaskResult as _diffmesh_stage_v1_TaskResult, TaskResult__Output as _diffmesh_stage_v1_TaskResult__Output } from '../../../diffmesh/stage/v1/TaskResult.js';
import type { TaskFailed as _diffmesh_stage_v1_TaskFailed, TaskFailed__Output as _diffmesh_stage_v1_TaskFailed__Output } from '../../../diffmesh/stage/v1/TaskFailed.js';

export interface WorkResponse {
  'status'?: (_diffmesh_stage_v1_InstanceStatus | null);
  'progress'?: (_diffmesh_stage_v1_TaskProgress | null);
  'result'?: (_diffmesh_stage_v1_TaskResult | null);
  'failed'?: (_diffmesh_stage_v1_TaskFailed | null);
  'kind'?: "status"|"progress"|"result"|"failed";
}

export interface WorkResponse__Output {
  'status'?: (_diffmesh_stage_v1_InstanceStatus__Output | null);
  'progress'?: (_diffmesh_stage_v1_TaskProgress__Output | null);
  'result'?: (_diffmesh_stage_v1_TaskResult__Output | null);
  'failed'?: (_diffmesh_stage_v1_TaskFailed__Output | null);
  'kind'?: "status"|"progress"|"result"|"failed";
}
