// Original file: proto/diffmesh/stage/v1/stage.proto

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';
import type { TaskPreview as _diffmesh_stage_v1_TaskPreview, TaskPreview__Output as _diffmesh_stage_v1_TaskPreview__Output } from '../../../diffmesh/stage/v1/TaskPreview.js';

/**
 * Progress inside a task, e.g. a denoising step.
 */
export interface TaskProgress {
  'reqId'?: (string);
  'stageIndex'?: (number);
  'attempt'?: (number);
  /**
   * Steps done so far, 1..total_steps.
   */
  'step'?: (number);
  'totalSteps'?: (number);
  /**
   * Objects the task keeps for a later try of itself, by name (e.g. a denoising
   * checkpoint: latents and sampler state every K steps). The scheduler passes
   * the latest of each name to the next try of this stage among its inputs, and
   * deletes them when the stage completes or the request ends. Store them in
   * tensor-svc under the request (object id `{req_id}:{name}:…`).
   */
  'checkpoint'?: ({[key: string]: _diffmesh_common_v1_ObjectRef});
  /**
   * Previews of the picture drawn since the last report, when the task's params
   * ask for them (GenerationParams.preview); each names the step it shows. A
   * preview is drawn while the next step's model runs, so it usually rides with
   * that step's progress; the last step's comes with it. Inline bytes, not an
   * ObjectRef: an image is a few KiB (at most 512 px a side), it goes to live
   * watchers only and is never stored, so a tensor-service object (put, TTL, a
   * second hop for every watcher) would cost more than it carries.
   */
  'previews'?: (_diffmesh_stage_v1_TaskPreview)[];
  /**
   * This progress is the task's last: it stops here for a PreemptTask, and
   * `checkpoint` holds where it stood (a TaskFailed with reason PREEMPTED follows).
   */
  'preempted'?: (boolean);
}

/**
 * Progress inside a task, e.g. a denoising step.
 */
export interface TaskProgress__Output {
  'reqId': (string);
  'stageIndex': (number);
  'attempt': (number);
  /**
   * Steps done so far, 1..total_steps.
   */
  'step': (number);
  'totalSteps': (number);
  /**
   * Objects the task keeps for a later try of itself, by name (e.g. a denoising
   * checkpoint: latents and sampler state every K steps). The scheduler passes
   * the latest of each name to the next try of this stage among its inputs, and
   * deletes them when the stage completes or the request ends. Store them in
   * tensor-svc under the request (object id `{req_id}:{name}:…`).
   */
  'checkpoint': ({[key: string]: _diffmesh_common_v1_ObjectRef__Output});
  /**
   * Previews of the picture drawn since the last report, when the task's params
   * ask for them (GenerationParams.preview); each names the step it shows. A
   * preview is drawn while the next step's model runs, so it usually rides with
   * that step's progress; the last step's comes with it. Inline bytes, not an
   * ObjectRef: an image is a few KiB (at most 512 px a side), it goes to live
   * watchers only and is never stored, so a tensor-service object (put, TTL, a
   * second hop for every watcher) would cost more than it carries.
   */
  'previews': (_diffmesh_stage_v1_TaskPreview__Output)[];
  /**
   * This progress is the task's last: it stops here for a PreemptTask, and
   * `checkpoint` holds where it stood (a TaskFailed with reason PREEMPTED follows).
   */
  'preempted': (boolean);
}
