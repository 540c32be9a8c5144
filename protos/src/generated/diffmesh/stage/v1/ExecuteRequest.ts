// Original file: proto/diffmesh/stage/v1/stage.proto

import type { Task as _diffmesh_stage_v1_Task, Task__Output as _diffmesh_stage_v1_Task__Output } from '../../../diffmesh/stage/v1/Task.js';

export interface ExecuteRequest {
  'task'?: (_diffmesh_stage_v1_Task | null);
}

export interface ExecuteRequest__Output {
  'task': (_diffmesh_stage_v1_Task__Output | null);
}
