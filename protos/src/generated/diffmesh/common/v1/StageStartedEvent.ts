// Original file: proto/diffmesh/common/v1/events.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';

/**
 * A stage instance started working on the request.
 */
export interface StageStartedEvent {
  'stageIndex'?: (number);
  'stage'?: (_diffmesh_common_v1_StageName);
  'pool'?: (string);
  'instanceId'?: (string);
  'attempt'?: (number);
}

/**
 * A stage instance started working on the request.
 */
export interface StageStartedEvent__Output {
  'stageIndex': (number);
  'stage': (_diffmesh_common_v1_StageName__Output);
  'pool': (string);
  'instanceId': (string);
  'attempt': (number);
}
