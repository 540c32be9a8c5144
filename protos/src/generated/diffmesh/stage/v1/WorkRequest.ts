// Original file: proto/diffmesh/stage/v1/stage.proto

import type { TaskAssignment as _diffmesh_stage_v1_TaskAssignment, TaskAssignment__Output as _diffmesh_stage_v1_TaskAssignment__Output } from '../../../diffmesh/stage/v1/TaskAssignment.js';
import type { CancelTask as _diffmesh_stage_v1_CancelTask, CancelTask__Output as _diffmesh_stage_v1_CancelTask__Output } from '../../../diffmesh/stage/v1/CancelTask.js';
import type { PreemptTask as _diffmesh_stage_v1_PreemptTask, PreemptTask__Output as _diffmesh_stage_v1_PreemptTask__Output } from '../../../diffmesh/stage/v1/PreemptTask.js';

export interface WorkRequest {
  'assignment'?: (_diffmesh_stage_v1_TaskAssignment | null);
  'cancel'?: (_diffmesh_stage_v1_CancelTask | null);
  'preempt'?: (_diffmesh_stage_v1_PreemptTask | null);
  'kind'?: "assignment"|"cancel"|"preempt";
}

export interface WorkRequest__Output {
  'assignment'?: (_diffmesh_stage_v1_TaskAssignment__Output | null);
  'cancel'?: (_diffmesh_stage_v1_CancelTask__Output | null);
  'preempt'?: (_diffmesh_stage_v1_PreemptTask__Output | null);
  'kind'?: "assignment"|"cancel"|"preempt";
}
