// Original file: proto/diffmesh/common/v1/events.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';

/**
 * The request was accepted and waits in the first stage's queue.
 */
export interface QueuedEvent {
  'pool'?: (string);
  /**
   * Tasks ahead of this one in the queue, when known.
   */
  'position'?: (number);
  /**
   * The stage of the plan whose task was queued (a later stage, or a task handed back by a
   * draining scheduler or instance, is queued again).
   */
  'stageIndex'?: (number);
  'stage'?: (_diffmesh_common_v1_StageName);
}

/**
 * The request was accepted and waits in the first stage's queue.
 */
export interface QueuedEvent__Output {
  'pool': (string);
  /**
   * Tasks ahead of this one in the queue, when known.
   */
  'position': (number);
  /**
   * The stage of the plan whose task was queued (a later stage, or a task handed back by a
   * draining scheduler or instance, is queued again).
   */
  'stageIndex': (number);
  'stage': (_diffmesh_common_v1_StageName__Output);
}
