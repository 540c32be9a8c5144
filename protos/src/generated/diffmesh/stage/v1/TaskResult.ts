// Original file: proto/diffmesh/stage/v1/stage.proto

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';

/**
 * A task finished.
 */
export interface TaskResult {
  'reqId'?: (string);
  'stageIndex'?: (number);
  'attempt'?: (number);
  /**
   * Outputs by name, held by the instance's tensor service.
   */
  'outputs'?: ({[key: string]: _diffmesh_common_v1_ObjectRef});
  'startedAt'?: (_google_protobuf_Timestamp | null);
  'finishedAt'?: (_google_protobuf_Timestamp | null);
  /**
   * Things the user should know that did not stop the stage (see
   * diffmesh.common.v1.StageFinishedEvent.warnings).
   */
  'warnings'?: (string)[];
}

/**
 * A task finished.
 */
export interface TaskResult__Output {
  'reqId': (string);
  'stageIndex': (number);
  'attempt': (number);
  /**
   * Outputs by name, held by the instance's tensor service.
   */
  'outputs': ({[key: string]: _diffmesh_common_v1_ObjectRef__Output});
  'startedAt': (_google_protobuf_Timestamp__Output | null);
  'finishedAt': (_google_protobuf_Timestamp__Output | null);
  /**
   * Things the user should know that did not stop the stage (see
   * diffmesh.common.v1.StageFinishedEvent.warnings).
   */
  'warnings': (string)[];
}
