// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';
import type { PoolInstance as _diffmesh_scheduler_v1_PoolInstance, PoolInstance__Output as _diffmesh_scheduler_v1_PoolInstance__Output } from '../../../diffmesh/scheduler/v1/PoolInstance.js';

/**
 * A worker pool as the scheduler sees it.
 */
export interface PoolStatus {
  'pool'?: (string);
  'stage'?: (_diffmesh_common_v1_StageName);
  /**
   * Tasks waiting for a free slot (queues pinned to a version range included).
   */
  'queued'?: (number);
  'instances'?: (_diffmesh_scheduler_v1_PoolInstance)[];
}

/**
 * A worker pool as the scheduler sees it.
 */
export interface PoolStatus__Output {
  'pool': (string);
  'stage': (_diffmesh_common_v1_StageName__Output);
  /**
   * Tasks waiting for a free slot (queues pinned to a version range included).
   */
  'queued': (number);
  'instances': (_diffmesh_scheduler_v1_PoolInstance__Output)[];
}
