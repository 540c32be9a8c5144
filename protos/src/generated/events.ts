import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { CancelledEvent as _diffmesh_common_v1_CancelledEvent, CancelledEvent__Output as _diffmesh_common_v1_CancelledEvent__Output } from './diffmesh/common/v1/CancelledEvent.js';
import type { CompletedEvent as _diffmesh_common_v1_CompletedEvent, CompletedEvent__Output as _diffmesh_common_v1_CompletedEvent__Output } from './diffmesh/common/v1/CompletedEvent.js';
import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from './diffmesh/common/v1/ErrorDetail.js';
import type { ExecutionPlan as _diffmesh_common_v1_ExecutionPlan, ExecutionPlan__Output as _diffmesh_common_v1_ExecutionPlan__Output } from './diffmesh/common/v1/ExecutionPlan.js';
import type { FailedEvent as _diffmesh_common_v1_FailedEvent, FailedEvent__Output as _diffmesh_common_v1_FailedEvent__Output } from './diffmesh/common/v1/FailedEvent.js';
import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from './diffmesh/common/v1/ObjectRef.js';
import type { PlanStage as _diffmesh_common_v1_PlanStage, PlanStage__Output as _diffmesh_common_v1_PlanStage__Output } from './diffmesh/common/v1/PlanStage.js';
import type { PreemptedEvent as _diffmesh_common_v1_PreemptedEvent, PreemptedEvent__Output as _diffmesh_common_v1_PreemptedEvent__Output } from './diffmesh/common/v1/PreemptedEvent.js';
import type { PreviewEvent as _diffmesh_common_v1_PreviewEvent, PreviewEvent__Output as _diffmesh_common_v1_PreviewEvent__Output } from './diffmesh/common/v1/PreviewEvent.js';
import type { QueuedEvent as _diffmesh_common_v1_QueuedEvent, QueuedEvent__Output as _diffmesh_common_v1_QueuedEvent__Output } from './diffmesh/common/v1/QueuedEvent.js';
import type { RequestEvent as _diffmesh_common_v1_RequestEvent, RequestEvent__Output as _diffmesh_common_v1_RequestEvent__Output } from './diffmesh/common/v1/RequestEvent.js';
import type { StageFinishedEvent as _diffmesh_common_v1_StageFinishedEvent, StageFinishedEvent__Output as _diffmesh_common_v1_StageFinishedEvent__Output } from './diffmesh/common/v1/StageFinishedEvent.js';
import type { StageStartedEvent as _diffmesh_common_v1_StageStartedEvent, StageStartedEvent__Output as _diffmesh_common_v1_StageStartedEvent__Output } from './diffmesh/common/v1/StageStartedEvent.js';
import type { StageTiming as _diffmesh_common_v1_StageTiming, StageTiming__Output as _diffmesh_common_v1_StageTiming__Output } from './diffmesh/common/v1/StageTiming.js';
import type { StepProgressEvent as _diffmesh_common_v1_StepProgressEvent, StepProgressEvent__Output as _diffmesh_common_v1_StepProgressEvent__Output } from './diffmesh/common/v1/StepProgressEvent.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from './google/protobuf/Timestamp.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  diffmesh: {
    common: {
      v1: {
        CancelledEvent: MessageTypeDefinition<_diffmesh_common_v1_CancelledEvent, _diffmesh_common_v1_CancelledEvent__Output>
        CompletedEvent: MessageTypeDefinition<_diffmesh_common_v1_CompletedEvent, _diffmesh_common_v1_CompletedEvent__Output>
        Dtype: EnumTypeDefinition
        ErrorDetail: MessageTypeDefinition<_diffmesh_common_v1_ErrorDetail, _diffmesh_common_v1_ErrorDetail__Output>
        ErrorReason: EnumTypeDefinition
        ExecutionPlan: MessageTypeDefinition<_diffmesh_common_v1_ExecutionPlan, _diffmesh_common_v1_ExecutionPlan__Output>
        FailedEvent: MessageTypeDefinition<_diffmesh_common_v1_FailedEvent, _diffmesh_common_v1_FailedEvent__Output>
        ObjectRef: MessageTypeDefinition<_diffmesh_common_v1_ObjectRef, _diffmesh_common_v1_ObjectRef__Output>
        PlanStage: MessageTypeDefinition<_diffmesh_common_v1_PlanStage, _diffmesh_common_v1_PlanStage__Output>
        PreemptedEvent: MessageTypeDefinition<_diffmesh_common_v1_PreemptedEvent, _diffmesh_common_v1_PreemptedEvent__Output>
        PreviewEvent: MessageTypeDefinition<_diffmesh_common_v1_PreviewEvent, _diffmesh_common_v1_PreviewEvent__Output>
        QueuedEvent: MessageTypeDefinition<_diffmesh_common_v1_QueuedEvent, _diffmesh_common_v1_QueuedEvent__Output>
        RequestEvent: MessageTypeDefinition<_diffmesh_common_v1_RequestEvent, _diffmesh_common_v1_RequestEvent__Output>
        StageFinishedEvent: MessageTypeDefinition<_diffmesh_common_v1_StageFinishedEvent, _diffmesh_common_v1_StageFinishedEvent__Output>
        StageName: EnumTypeDefinition
        StageStartedEvent: MessageTypeDefinition<_diffmesh_common_v1_StageStartedEvent, _diffmesh_common_v1_StageStartedEvent__Output>
        StageTiming: MessageTypeDefinition<_diffmesh_common_v1_StageTiming, _diffmesh_common_v1_StageTiming__Output>
        StepProgressEvent: MessageTypeDefinition<_diffmesh_common_v1_StepProgressEvent, _diffmesh_common_v1_StepProgressEvent__Output>
      }
    }
  }
  google: {
    protobuf: {
      Timestamp: MessageTypeDefinition<_google_protobuf_Timestamp, _google_protobuf_Timestamp__Output>
    }
    rpc: {
      Code: EnumTypeDefinition
    }
  }
}

