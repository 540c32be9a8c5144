import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { AdapterParams as _diffmesh_common_v1_AdapterParams, AdapterParams__Output as _diffmesh_common_v1_AdapterParams__Output } from './diffmesh/common/v1/AdapterParams.js';
import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from './diffmesh/common/v1/ErrorDetail.js';
import type { ExecutionPlan as _diffmesh_common_v1_ExecutionPlan, ExecutionPlan__Output as _diffmesh_common_v1_ExecutionPlan__Output } from './diffmesh/common/v1/ExecutionPlan.js';
import type { GenerationParams as _diffmesh_common_v1_GenerationParams, GenerationParams__Output as _diffmesh_common_v1_GenerationParams__Output } from './diffmesh/common/v1/GenerationParams.js';
import type { InputImage as _diffmesh_common_v1_InputImage, InputImage__Output as _diffmesh_common_v1_InputImage__Output } from './diffmesh/common/v1/InputImage.js';
import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from './diffmesh/common/v1/ObjectRef.js';
import type { PlanStage as _diffmesh_common_v1_PlanStage, PlanStage__Output as _diffmesh_common_v1_PlanStage__Output } from './diffmesh/common/v1/PlanStage.js';
import type { PreviewParams as _diffmesh_common_v1_PreviewParams, PreviewParams__Output as _diffmesh_common_v1_PreviewParams__Output } from './diffmesh/common/v1/PreviewParams.js';
import type { RequestContext as _diffmesh_common_v1_RequestContext, RequestContext__Output as _diffmesh_common_v1_RequestContext__Output } from './diffmesh/common/v1/RequestContext.js';
import type { StepCacheParams as _diffmesh_common_v1_StepCacheParams, StepCacheParams__Output as _diffmesh_common_v1_StepCacheParams__Output } from './diffmesh/common/v1/StepCacheParams.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from './google/protobuf/Timestamp.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  diffmesh: {
    common: {
      v1: {
        AdapterParams: MessageTypeDefinition<_diffmesh_common_v1_AdapterParams, _diffmesh_common_v1_AdapterParams__Output>
        Dtype: EnumTypeDefinition
        ErrorDetail: MessageTypeDefinition<_diffmesh_common_v1_ErrorDetail, _diffmesh_common_v1_ErrorDetail__Output>
        ErrorReason: EnumTypeDefinition
        ExecutionPlan: MessageTypeDefinition<_diffmesh_common_v1_ExecutionPlan, _diffmesh_common_v1_ExecutionPlan__Output>
        GenerationParams: MessageTypeDefinition<_diffmesh_common_v1_GenerationParams, _diffmesh_common_v1_GenerationParams__Output>
        InputImage: MessageTypeDefinition<_diffmesh_common_v1_InputImage, _diffmesh_common_v1_InputImage__Output>
        ObjectRef: MessageTypeDefinition<_diffmesh_common_v1_ObjectRef, _diffmesh_common_v1_ObjectRef__Output>
        PlanStage: MessageTypeDefinition<_diffmesh_common_v1_PlanStage, _diffmesh_common_v1_PlanStage__Output>
        PreviewParams: MessageTypeDefinition<_diffmesh_common_v1_PreviewParams, _diffmesh_common_v1_PreviewParams__Output>
        RequestContext: MessageTypeDefinition<_diffmesh_common_v1_RequestContext, _diffmesh_common_v1_RequestContext__Output>
        RequestStatus: EnumTypeDefinition
        StageName: EnumTypeDefinition
        StepCacheParams: MessageTypeDefinition<_diffmesh_common_v1_StepCacheParams, _diffmesh_common_v1_StepCacheParams__Output>
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

