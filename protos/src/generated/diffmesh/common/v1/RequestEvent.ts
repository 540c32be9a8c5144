// Original file: proto/diffmesh/common/v1/events.proto

import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';
import type { QueuedEvent as _diffmesh_common_v1_QueuedEvent, QueuedEvent__Output as _diffmesh_common_v1_QueuedEvent__Output } from '../../../diffmesh/common/v1/QueuedEvent.js';
import type { StageStartedEvent as _diffmesh_common_v1_StageStartedEvent, StageStartedEvent__Output as _diffmesh_common_v1_StageStartedEvent__Output } from '../../../diffmesh/common/v1/StageStartedEvent.js';
import type { StageFinishedEvent as _diffmesh_common_v1_StageFinishedEvent, StageFinishedEvent__Output as _diffmesh_common_v1_StageFinishedEvent__Output } from '../../../diffmesh/common/v1/StageFinishedEvent.js';
import type { StepProgressEvent as _diffmesh_common_v1_StepProgressEvent, StepProgressEvent__Output as _diffmesh_common_v1_StepProgressEvent__Output } from '../../../diffmesh/common/v1/StepProgressEvent.js';
import type { CompletedEvent as _diffmesh_common_v1_CompletedEvent, CompletedEvent__Output as _diffmesh_common_v1_CompletedEvent__Output } from '../../../diffmesh/common/v1/CompletedEvent.js';
import type { FailedEvent as _diffmesh_common_v1_FailedEvent, FailedEvent__Output as _diffmesh_common_v1_FailedEvent__Output } from '../../../diffmesh/common/v1/FailedEvent.js';
import type { CancelledEvent as _diffmesh_common_v1_CancelledEvent, CancelledEvent__Output as _diffmesh_common_v1_CancelledEvent__Output } from '../../../diffmesh/common/v1/CancelledEvent.js';
import type { PreemptedEvent as _diffmesh_common_v1_PreemptedEvent, PreemptedEvent__Output as _diffmesh_common_v1_PreemptedEvent__Output } from '../../../diffmesh/common/v1/PreemptedEvent.js';
import type { PreviewEvent as _diffmesh_common_v1_PreviewEvent, PreviewEvent__Output as _diffmesh_common_v1_PreviewEvent__Output } from '../../../diffmesh/common/v1/PreviewEvent.js';

/**
 * One event in the life of a request, as streamed by Generate and Watch.
 */
export interface RequestEvent {
  'reqId'?: (string);
  'time'?: (_google_protobuf_Timestamp | null);
  /**
   * Increases by one per event of a request, starting at 1.
   */
  'sequence'?: (number);
  'queued'?: (_diffmesh_common_v1_QueuedEvent | null);
  'stageStarted'?: (_diffmesh_common_v1_StageStartedEvent | null);
  'stageFinished'?: (_diffmesh_common_v1_StageFinishedEvent | null);
  'stepProgress'?: (_diffmesh_common_v1_StepProgressEvent | null);
  'completed'?: (_diffmesh_common_v1_CompletedEvent | null);
  'failed'?: (_diffmesh_common_v1_FailedEvent | null);
  'cancelled'?: (_diffmesh_common_v1_CancelledEvent | null);
  'preempted'?: (_diffmesh_common_v1_PreemptedEvent | null);
  'preview'?: (_diffmesh_common_v1_PreviewEvent | null);
  'kind'?: "queued"|"stageStarted"|"stageFinished"|"stepProgress"|"completed"|"failed"|"cancelled"|"preempted"|"preview";
}

/**
 * One event in the life of a request, as streamed by Generate and Watch.
 */
export interface RequestEvent__Output {
  'reqId': (string);
  'time': (_google_protobuf_Timestamp__Output | null);
  /**
   * Increases by one per event of a request, starting at 1.
   */
  'sequence': (number);
  'queued'?: (_diffmesh_common_v1_QueuedEvent__Output | null);
  'stageStarted'?: (_diffmesh_common_v1_StageStartedEvent__Output | null);
  'stageFinished'?: (_diffmesh_common_v1_StageFinishedEvent__Output | null);
  'stepProgress'?: (_diffmesh_common_v1_StepProgressEvent__Output | null);
  'completed'?: (_diffmesh_common_v1_CompletedEvent__Output | null);
  'failed'?: (_diffmesh_common_v1_FailedEvent__Output | null);
  'cancelled'?: (_diffmesh_common_v1_CancelledEvent__Output | null);
  'preempted'?: (_diffmesh_common_v1_PreemptedEvent__Output | null);
  'preview'?: (_diffmesh_common_v1_PreviewEvent__Output | null);
  'kind'?: "queued"|"stageStarted"|"stageFinished"|"stepProgress"|"completed"|"failed"|"cancelled"|"preempted"|"preview";
}
