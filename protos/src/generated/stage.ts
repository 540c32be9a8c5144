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
import type { AdapterReport as _diffmesh_stage_v1_AdapterReport, AdapterReport__Output as _diffmesh_stage_v1_AdapterReport__Output } from './diffmesh/stage/v1/AdapterReport.js';
import type { CancelTask as _diffmesh_stage_v1_CancelTask, CancelTask__Output as _diffmesh_stage_v1_CancelTask__Output } from './diffmesh/stage/v1/CancelTask.js';
import type { DescribeRequest as _diffmesh_stage_v1_DescribeRequest, DescribeRequest__Output as _diffmesh_stage_v1_DescribeRequest__Output } from './diffmesh/stage/v1/DescribeRequest.js';
import type { DescribeResponse as _diffmesh_stage_v1_DescribeResponse, DescribeResponse__Output as _diffmesh_stage_v1_DescribeResponse__Output } from './diffmesh/stage/v1/DescribeResponse.js';
import type { ExecuteRequest as _diffmesh_stage_v1_ExecuteRequest, ExecuteRequest__Output as _diffmesh_stage_v1_ExecuteRequest__Output } from './diffmesh/stage/v1/ExecuteRequest.js';
import type { ExecuteResponse as _diffmesh_stage_v1_ExecuteResponse, ExecuteResponse__Output as _diffmesh_stage_v1_ExecuteResponse__Output } from './diffmesh/stage/v1/ExecuteResponse.js';
import type { InstanceStatus as _diffmesh_stage_v1_InstanceStatus, InstanceStatus__Output as _diffmesh_stage_v1_InstanceStatus__Output } from './diffmesh/stage/v1/InstanceStatus.js';
import type { PreemptTask as _diffmesh_stage_v1_PreemptTask, PreemptTask__Output as _diffmesh_stage_v1_PreemptTask__Output } from './diffmesh/stage/v1/PreemptTask.js';
import type { StageServiceClient as _diffmesh_stage_v1_StageServiceClient, StageServiceDefinition as _diffmesh_stage_v1_StageServiceDefinition } from './diffmesh/stage/v1/StageService.js';
import type { Task as _diffmesh_stage_v1_Task, Task__Output as _diffmesh_stage_v1_Task__Output } from './diffmesh/stage/v1/Task.js';
import type { TaskAssignment as _diffmesh_stage_v1_TaskAssignment, TaskAssignment__Output as _diffmesh_stage_v1_TaskAssignment__Output } from './diffmesh/stage/v1/TaskAssignment.js';
import type { TaskFailed as _diffmesh_stage_v1_TaskFailed, TaskFailed__Output as _diffmesh_stage_v1_TaskFailed__Output } from './diffmesh/stage/v1/TaskFailed.js';
import type { TaskPreview as _diffmesh_stage_v1_TaskPreview, TaskPreview__Output as _diffmesh_stage_v1_TaskPreview__Output } from './diffmesh/stage/v1/TaskPreview.js';
import type { TaskProgress as _diffmesh_stage_v1_TaskProgress, TaskProgress__Output as _diffmesh_stage_v1_TaskProgress__Output } from './diffmesh/stage/v1/TaskProgress.js';
import type { TaskResult as _diffmesh_stage_v1_TaskResult, TaskResult__Output as _diffmesh_stage_v1_TaskResult__Output } from './diffmesh/stage/v1/TaskResult.js';
import type { WorkRequest as _diffmesh_stage_v1_WorkRequest, WorkRequest__Output as _diffmesh_stage_v1_WorkRequest__Output } from './diffmesh/stage/v1/WorkRequest.js';
import type { WorkResponse as _diffmesh_stage_v1_WorkResponse, WorkResponse__Output as _diffmesh_stage_v1_WorkResponse__Output } from './diffmesh/stage/v1/WorkResponse.js';
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
    stage: {
      v1: {
        AdapterReport: MessageTypeDefinition<_diffmesh_stage_v1_AdapterReport, _diffmesh_stage_v1_AdapterReport__Output>
        CancelTask: MessageTypeDefinition<_diffmesh_stage_v1_CancelTask, _diffmesh_stage_v1_CancelTask__Output>
        DescribeRequest: MessageTypeDefinition<_diffmesh_stage_v1_DescribeRequest, _diffmesh_stage_v1_DescribeRequest__Output>
        DescribeResponse: MessageTypeDefinition<_diffmesh_stage_v1_DescribeResponse, _diffmesh_stage_v1_DescribeResponse__Output>
        ExecuteRequest: MessageTypeDefinition<_diffmesh_stage_v1_ExecuteRequest, _diffmesh_stage_v1_ExecuteRequest__Output>
        ExecuteResponse: MessageTypeDefinition<_diffmesh_stage_v1_ExecuteResponse, _diffmesh_stage_v1_ExecuteResponse__Output>
        InstanceStatus: MessageTypeDefinition<_diffmesh_stage_v1_InstanceStatus, _diffmesh_stage_v1_InstanceStatus__Output>
        PreemptTask: MessageTypeDefinition<_diffmesh_stage_v1_PreemptTask, _diffmesh_stage_v1_PreemptTask__Output>
        /**
         * Served by every stage instance (encoder, denoiser, VAE decoder). The
         * scheduler dispatches over Work, one long-lived stream per instance; Execute
         * runs one task on its own call (tools, tests, direct use).
         */
        StageService: SubtypeConstructor<typeof grpc.Client, _diffmesh_stage_v1_StageServiceClient> & { service: _diffmesh_stage_v1_StageServiceDefinition }
        Task: MessageTypeDefinition<_diffmesh_stage_v1_Task, _diffmesh_stage_v1_Task__Output>
        TaskAssignment: MessageTypeDefinition<_diffmesh_stage_v1_TaskAssignment, _diffmesh_stage_v1_TaskAssignment__Output>
        TaskFailed: MessageTypeDefinition<_diffmesh_stage_v1_TaskFailed, _diffmesh_stage_v1_TaskFailed__Output>
        TaskPreview: MessageTypeDefinition<_diffmesh_stage_v1_TaskPreview, _diffmesh_stage_v1_TaskPreview__Output>
        TaskProgress: MessageTypeDefinition<_diffmesh_stage_v1_TaskProgress, _diffmesh_stage_v1_TaskProgress__Output>
        TaskResult: MessageTypeDefinition<_diffmesh_stage_v1_TaskResult, _diffmesh_stage_v1_TaskResult__Output>
        WorkRequest: MessageTypeDefinition<_diffmesh_stage_v1_WorkRequest, _diffmesh_stage_v1_WorkRequest__Output>
        WorkResponse: MessageTypeDefinition<_diffmesh_stage_v1_WorkResponse, _diffmesh_stage_v1_WorkResponse__Output>
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

