// Original file: proto/diffmesh/common/v1/events.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';

/**
 * When and where one stage of a request ran.
 */
export interface StageTiming {
  'stageIndex'?: (number);
  'stage'?: (_diffmesh_common_v1_StageName);
  'pool'?: (string);
  'instanceId'?: (string);
  /**
   * 1 for the first attempt.
   */
  'attempt'?: (number);
  'enqueuedAt'?: (_google_protobuf_Timestamp | null);
  'startedAt'?: (_google_protobuf_Timestamp | null);
  'finishedAt'?: (_google_protobuf_Timestamp | null);
}

/**
 * When and where one stage of a request ran.
 */
export interface StageTiming__Output {
  'stageIndex': (number);
  'stage': (_diffmesh_common_v1_StageName__Output);
  'pool': (string);
  'instanceId': (string);
  /**
   * 1 for the first attempt.
   */
  'attempt': (number);
  'enqueuedAt': (_google_protobuf_Timestamp__Output | null);
  'startedAt': (_google_protobuf_Timestamp__Output | null);
  'finishedAt': (_google_protobuf_Timestamp__Output | null);
}
