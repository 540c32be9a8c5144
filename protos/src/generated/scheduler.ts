import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { AdapterParams as _diffmesh_common_v1_AdapterParams, AdapterParams__Output as _diffmesh_common_v1_AdapterParams__Output } from './diffmesh/common/v1/AdapterParams.js';
import type { CancelledEvent as _diffmesh_common_v1_CancelledEvent, CancelledEvent__Output as _diffmesh_common_v1_CancelledEvent__Output } from './diffmesh/common/v1/CancelledEvent.js';
import type { CompletedEvent as _diffmesh_common_v1_CompletedEvent, CompletedEvent__Output as _diffmesh_common_v1_CompletedEvent__Output } from './diffmesh/common/v1/CompletedEvent.js';
import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from './diffmesh/common/v1/ErrorDetail.js';
import type { ExecutionPlan as _diffmesh_common_v1_ExecutionPlan, ExecutionPlan__Output as _diffmesh_common_v1_ExecutionPlan__Output } from './diffmesh/common/v1/ExecutionPlan.js';
import type { FailedEvent as _diffmesh_common_v1_FailedEvent, FailedEvent__Output as _diffmesh_common_v1_FailedEvent__Output } from './diffmesh/common/v1/FailedEvent.js';
import type { GenerationParams as _diffmesh_common_v1_GenerationParams, GenerationParams__Output as _diffmesh_common_v1_GenerationParams__Output } from './diffmesh/common/v1/GenerationParams.js';
import type { InputImage as _diffmesh_common_v1_InputImage, InputImage__Output as _diffmesh_common_v1_InputImage__Output } from './diffmesh/common/v1/InputImage.js';
import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from './diffmesh/common/v1/ObjectRef.js';
import type { PlanStage as _diffmesh_common_v1_PlanStage, PlanStage__Output as _diffmesh_common_v1_PlanStage__Output } from './diffmesh/common/v1/PlanStage.js';
import type { PreemptedEvent as _diffmesh_common_v1_PreemptedEvent, PreemptedEvent__Output as _diffmesh_common_v1_PreemptedEvent__Output } from './diffmesh/common/v1/PreemptedEvent.js';
import type { PreviewEvent as _diffmesh_common_v1_PreviewEvent, PreviewEvent__Output as _diffmesh_common_v1_PreviewEvent__Output } from './diffmesh/common/v1/PreviewEvent.js';
import type { PreviewParams as _diffmesh_common_v1_PreviewParams, PreviewParams__Output as _diffmesh_common_v1_PreviewParams__Output } from './diffmesh/common/v1/PreviewParams.js';
import type { QueuedEvent as _diffmesh_common_v1_QueuedEvent, QueuedEvent__Output as _diffmesh_common_v1_QueuedEvent__Output } from './diffmesh/common/v1/QueuedEvent.js';
import type { RequestContext as _diffmesh_common_v1_RequestContext, RequestContext__Output as _diffmesh_common_v1_RequestContext__Output } from './diffmesh/common/v1/RequestContext.js';
import type { RequestEvent as _diffmesh_common_v1_RequestEvent, RequestEvent__Output as _diffmesh_common_v1_RequestEvent__Output } from './diffmesh/common/v1/RequestEvent.js';
import type { StageFinishedEvent as _diffmesh_common_v1_StageFinishedEvent, StageFinishedEvent__Output as _diffmesh_common_v1_StageFinishedEvent__Output } from './diffmesh/common/v1/StageFinishedEvent.js';
import type { StageStartedEvent as _diffmesh_common_v1_StageStartedEvent, StageStartedEvent__Output as _diffmesh_common_v1_StageStartedEvent__Output } from './diffmesh/common/v1/StageStartedEvent.js';
import type { StageTiming as _diffmesh_common_v1_StageTiming, StageTiming__Output as _diffmesh_common_v1_StageTiming__Output } from './diffmesh/common/v1/StageTiming.js';
import type { StepCacheParams as _diffmesh_common_v1_StepCacheParams, StepCacheParams__Output as _diffmesh_common_v1_StepCacheParams__Output } from './diffmesh/common/v1/StepCacheParams.js';
import type { StepProgressEvent as _diffmesh_common_v1_StepProgressEvent, StepProgressEvent__Output as _diffmesh_common_v1_StepProgressEvent__Output } from './diffmesh/common/v1/StepProgressEvent.js';
import type { CancelRequest as _diffmesh_scheduler_v1_CancelRequest, CancelRequest__Output as _diffmesh_scheduler_v1_CancelRequest__Output } from './diffmesh/scheduler/v1/CancelRequest.js';
import type { CancelResponse as _diffmesh_scheduler_v1_CancelResponse, CancelResponse__Output as _diffmesh_scheduler_v1_CancelResponse__Output } from './diffmesh/scheduler/v1/CancelResponse.js';
import type { GenerateRequest as _diffmesh_scheduler_v1_GenerateRequest, GenerateRequest__Output as _diffmesh_scheduler_v1_GenerateRequest__Output } from './diffmesh/scheduler/v1/GenerateRequest.js';
import type { GenerateResponse as _diffmesh_scheduler_v1_GenerateResponse, GenerateResponse__Output as _diffmesh_scheduler_v1_GenerateResponse__Output } from './diffmesh/scheduler/v1/GenerateResponse.js';
import type { GetRequest as _diffmesh_scheduler_v1_GetRequest, GetRequest__Output as _diffmesh_scheduler_v1_GetRequest__Output } from './diffmesh/scheduler/v1/GetRequest.js';
import type { GetResponse as _diffmesh_scheduler_v1_GetResponse, GetResponse__Output as _diffmesh_scheduler_v1_GetResponse__Output } from './diffmesh/scheduler/v1/GetResponse.js';
import type { GetResultRequest as _diffmesh_scheduler_v1_GetResultRequest, GetResultRequest__Output as _diffmesh_scheduler_v1_GetResultRequest__Output } from './diffmesh/scheduler/v1/GetResultRequest.js';
import type { GetResultResponse as _diffmesh_scheduler_v1_GetResultResponse, GetResultResponse__Output as _diffmesh_scheduler_v1_GetResultResponse__Output } from './diffmesh/scheduler/v1/GetResultResponse.js';
import type { GetStatusRequest as _diffmesh_scheduler_v1_GetStatusRequest, GetStatusRequest__Output as _diffmesh_scheduler_v1_GetStatusRequest__Output } from './diffmesh/scheduler/v1/GetStatusRequest.js';
import type { GetStatusResponse as _diffmesh_scheduler_v1_GetStatusResponse, GetStatusResponse__Output as _diffmesh_scheduler_v1_GetStatusResponse__Output } from './diffmesh/scheduler/v1/GetStatusResponse.js';
import type { ListModelsRequest as _diffmesh_scheduler_v1_ListModelsRequest, ListModelsRequest__Output as _diffmesh_scheduler_v1_ListModelsRequest__Output } from './diffmesh/scheduler/v1/ListModelsRequest.js';
import type { ListModelsResponse as _diffmesh_scheduler_v1_ListModelsResponse, ListModelsResponse__Output as _diffmesh_scheduler_v1_ListModelsResponse__Output } from './diffmesh/scheduler/v1/ListModelsResponse.js';
import type { ModelInfo as _diffmesh_scheduler_v1_ModelInfo, ModelInfo__Output as _diffmesh_scheduler_v1_ModelInfo__Output } from './diffmesh/scheduler/v1/ModelInfo.js';
import type { PoolInstance as _diffmesh_scheduler_v1_PoolInstance, PoolInstance__Output as _diffmesh_scheduler_v1_PoolInstance__Output } from './diffmesh/scheduler/v1/PoolInstance.js';
import type { PoolStatus as _diffmesh_scheduler_v1_PoolStatus, PoolStatus__Output as _diffmesh_scheduler_v1_PoolStatus__Output } from './diffmesh/scheduler/v1/PoolStatus.js';
import type { RecentRequest as _diffmesh_scheduler_v1_RecentRequest, RecentRequest__Output as _diffmesh_scheduler_v1_RecentRequest__Output } from './diffmesh/scheduler/v1/RecentRequest.js';
import type { ResultHeader as _diffmesh_scheduler_v1_ResultHeader, ResultHeader__Output as _diffmesh_scheduler_v1_ResultHeader__Output } from './diffmesh/scheduler/v1/ResultHeader.js';
import type { SchedulerServiceClient as _diffmesh_scheduler_v1_SchedulerServiceClient, SchedulerServiceDefinition as _diffmesh_scheduler_v1_SchedulerServiceDefinition } from './diffmesh/scheduler/v1/SchedulerService.js';
import type { SessionAnswer as _diffmesh_scheduler_v1_SessionAnswer, SessionAnswer__Output as _diffmesh_scheduler_v1_SessionAnswer__Output } from './diffmesh/scheduler/v1/SessionAnswer.js';
import type { SessionRequest as _diffmesh_scheduler_v1_SessionRequest, SessionRequest__Output as _diffmesh_scheduler_v1_SessionRequest__Output } from './diffmesh/scheduler/v1/SessionRequest.js';
import type { SessionResponse as _diffmesh_scheduler_v1_SessionResponse, SessionResponse__Output as _diffmesh_scheduler_v1_SessionResponse__Output } from './diffmesh/scheduler/v1/SessionResponse.js';
import type { SubmitRequest as _diffmesh_scheduler_v1_SubmitRequest, SubmitRequest__Output as _diffmesh_scheduler_v1_SubmitRequest__Output } from './diffmesh/scheduler/v1/SubmitRequest.js';
import type { SubmitResponse as _diffmesh_scheduler_v1_SubmitResponse, SubmitResponse__Output as _diffmesh_scheduler_v1_SubmitResponse__Output } from './diffmesh/scheduler/v1/SubmitResponse.js';
import type { WatchRequest as _diffmesh_scheduler_v1_WatchRequest, WatchRequest__Output as _diffmesh_scheduler_v1_WatchRequest__Output } from './diffmesh/scheduler/v1/WatchRequest.js';
import type { WatchResponse as _diffmesh_scheduler_v1_WatchResponse, WatchResponse__Output as _diffmesh_scheduler_v1_WatchResponse__Output } from './diffmesh/scheduler/v1/WatchResponse.js';
import type { CustomHttpPattern as _google_api_CustomHttpPattern, CustomHttpPattern__Output as _google_api_CustomHttpPattern__Output } from './google/api/CustomHttpPattern.js';
import type { Http as _google_api_Http, Http__Output as _google_api_Http__Output } from './google/api/Http.js';
import type { HttpRule as _google_api_HttpRule, HttpRule__Output as _google_api_HttpRule__Output } from './google/api/HttpRule.js';
import type { DescriptorProto as _google_protobuf_DescriptorProto, DescriptorProto__Output as _google_protobuf_DescriptorProto__Output } from './google/protobuf/DescriptorProto.js';
import type { EnumDescriptorProto as _google_protobuf_EnumDescriptorProto, EnumDescriptorProto__Output as _google_protobuf_EnumDescriptorProto__Output } from './google/protobuf/EnumDescriptorProto.js';
import type { EnumOptions as _google_protobuf_EnumOptions, EnumOptions__Output as _google_protobuf_EnumOptions__Output } from './google/protobuf/EnumOptions.js';
import type { EnumValueDescriptorProto as _google_protobuf_EnumValueDescriptorProto, EnumValueDescriptorProto__Output as _google_protobuf_EnumValueDescriptorProto__Output } from './google/protobuf/EnumValueDescriptorProto.js';
import type { EnumValueOptions as _google_protobuf_EnumValueOptions, EnumValueOptions__Output as _google_protobuf_EnumValueOptions__Output } from './google/protobuf/EnumValueOptions.js';
import type { ExtensionRangeOptions as _google_protobuf_ExtensionRangeOptions, ExtensionRangeOptions__Output as _google_protobuf_ExtensionRangeOptions__Output } from './google/protobuf/ExtensionRangeOptions.js';
import type { FeatureSet as _google_protobuf_FeatureSet, FeatureSet__Output as _google_protobuf_FeatureSet__Output } from './google/protobuf/FeatureSet.js';
import type { FeatureSetDefaults as _google_protobuf_FeatureSetDefaults, FeatureSetDefaults__Output as _google_protobuf_FeatureSetDefaults__Output } from './google/protobuf/FeatureSetDefaults.js';
import type { FieldDescriptorProto as _google_protobuf_FieldDescriptorProto, FieldDescriptorProto__Output as _google_protobuf_FieldDescriptorProto__Output } from './google/protobuf/FieldDescriptorProto.js';
import type { FieldOptions as _google_protobuf_FieldOptions, FieldOptions__Output as _google_protobuf_FieldOptions__Output } from './google/protobuf/FieldOptions.js';
import type { FileDescriptorProto as _google_protobuf_FileDescriptorProto, FileDescriptorProto__Output as _google_protobuf_FileDescriptorProto__Output } from './google/protobuf/FileDescriptorProto.js';
import type { FileDescriptorSet as _google_protobuf_FileDescriptorSet, FileDescriptorSet__Output as _google_protobuf_FileDescriptorSet__Output } from './google/protobuf/FileDescriptorSet.js';
import type { FileOptions as _google_protobuf_FileOptions, FileOptions__Output as _google_protobuf_FileOptions__Output } from './google/protobuf/FileOptions.js';
import type { GeneratedCodeInfo as _google_protobuf_GeneratedCodeInfo, GeneratedCodeInfo__Output as _google_protobuf_GeneratedCodeInfo__Output } from './google/protobuf/GeneratedCodeInfo.js';
import type { MessageOptions as _google_protobuf_MessageOptions, MessageOptions__Output as _google_protobuf_MessageOptions__Output } from './google/protobuf/MessageOptions.js';
import type { MethodDescriptorProto as _google_protobuf_MethodDescriptorProto, MethodDescriptorProto__Output as _google_protobuf_MethodDescriptorProto__Output } from './google/protobuf/MethodDescriptorProto.js';
import type { MethodOptions as _google_protobuf_MethodOptions, MethodOptions__Output as _google_protobuf_MethodOptions__Output } from './google/protobuf/MethodOptions.js';
import type { OneofDescriptorProto as _google_protobuf_OneofDescriptorProto, OneofDescriptorProto__Output as _google_protobuf_OneofDescriptorProto__Output } from './google/protobuf/OneofDescriptorProto.js';
import type { OneofOptions as _google_protobuf_OneofOptions, OneofOptions__Output as _google_protobuf_OneofOptions__Output } from './google/protobuf/OneofOptions.js';
import type { ServiceDescriptorProto as _google_protobuf_ServiceDescriptorProto, ServiceDescriptorProto__Output as _google_protobuf_ServiceDescriptorProto__Output } from './google/protobuf/ServiceDescriptorProto.js';
import type { ServiceOptions as _google_protobuf_ServiceOptions, ServiceOptions__Output as _google_protobuf_ServiceOptions__Output } from './google/protobuf/ServiceOptions.js';
import type { SourceCodeInfo as _google_protobuf_SourceCodeInfo, SourceCodeInfo__Output as _google_protobuf_SourceCodeInfo__Output } from './google/protobuf/SourceCodeInfo.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from './google/protobuf/Timestamp.js';
import type { UninterpretedOption as _google_protobuf_UninterpretedOption, UninterpretedOption__Output as _google_protobuf_UninterpretedOption__Output } from './google/protobuf/UninterpretedOption.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  diffmesh: {
    common: {
      v1: {
        AdapterParams: MessageTypeDefinition<_diffmesh_common_v1_AdapterParams, _diffmesh_common_v1_AdapterParams__Output>
        CancelledEvent: MessageTypeDefinition<_diffmesh_common_v1_CancelledEvent, _diffmesh_common_v1_CancelledEvent__Output>
        CompletedEvent: MessageTypeDefinition<_diffmesh_common_v1_CompletedEvent, _diffmesh_common_v1_CompletedEvent__Output>
        Dtype: EnumTypeDefinition
        ErrorDetail: MessageTypeDefinition<_diffmesh_common_v1_ErrorDetail, _diffmesh_common_v1_ErrorDetail__Output>
        ErrorReason: EnumTypeDefinition
        ExecutionPlan: MessageTypeDefinition<_diffmesh_common_v1_ExecutionPlan, _diffmesh_common_v1_ExecutionPlan__Output>
        FailedEvent: MessageTypeDefinition<_diffmesh_common_v1_FailedEvent, _diffmesh_common_v1_FailedEvent__Output>
        GenerationParams: MessageTypeDefinition<_diffmesh_common_v1_GenerationParams, _diffmesh_common_v1_GenerationParams__Output>
        InputImage: MessageTypeDefinition<_diffmesh_common_v1_InputImage, _diffmesh_common_v1_InputImage__Output>
        ObjectRef: MessageTypeDefinition<_diffmesh_common_v1_ObjectRef, _diffmesh_common_v1_ObjectRef__Output>
        PlanStage: MessageTypeDefinition<_diffmesh_common_v1_PlanStage, _diffmesh_common_v1_PlanStage__Output>
        PreemptedEvent: MessageTypeDefinition<_diffmesh_common_v1_PreemptedEvent, _diffmesh_common_v1_PreemptedEvent__Output>
        PreviewEvent: MessageTypeDefinition<_diffmesh_common_v1_PreviewEvent, _diffmesh_common_v1_PreviewEvent__Output>
        PreviewParams: MessageTypeDefinition<_diffmesh_common_v1_PreviewParams, _diffmesh_common_v1_PreviewParams__Output>
        QueuedEvent: MessageTypeDefinition<_diffmesh_common_v1_QueuedEvent, _diffmesh_common_v1_QueuedEvent__Output>
        RequestContext: MessageTypeDefinition<_diffmesh_common_v1_RequestContext, _diffmesh_common_v1_RequestContext__Output>
        RequestEvent: MessageTypeDefinition<_diffmesh_common_v1_RequestEvent, _diffmesh_common_v1_RequestEvent__Output>
        RequestStatus: EnumTypeDefinition
        StageFinishedEvent: MessageTypeDefinition<_diffmesh_common_v1_StageFinishedEvent, _diffmesh_common_v1_StageFinishedEvent__Output>
        StageName: EnumTypeDefinition
        StageStartedEvent: MessageTypeDefinition<_diffmesh_common_v1_StageStartedEvent, _diffmesh_common_v1_StageStartedEvent__Output>
        StageTiming: MessageTypeDefinition<_diffmesh_common_v1_StageTiming, _diffmesh_common_v1_StageTiming__Output>
        StepCacheParams: MessageTypeDefinition<_diffmesh_common_v1_StepCacheParams, _diffmesh_common_v1_StepCacheParams__Output>
        StepProgressEvent: MessageTypeDefinition<_diffmesh_common_v1_StepProgressEvent, _diffmesh_common_v1_StepProgressEvent__Output>
      }
    }
    scheduler: {
      v1: {
        BreakerState: EnumTypeDefinition
        CancelRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_CancelRequest, _diffmesh_scheduler_v1_CancelRequest__Output>
        CancelResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_CancelResponse, _diffmesh_scheduler_v1_CancelResponse__Output>
        GenerateRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_GenerateRequest, _diffmesh_scheduler_v1_GenerateRequest__Output>
        GenerateResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_GenerateResponse, _diffmesh_scheduler_v1_GenerateResponse__Output>
        GetRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_GetRequest, _diffmesh_scheduler_v1_GetRequest__Output>
        GetResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_GetResponse, _diffmesh_scheduler_v1_GetResponse__Output>
        GetResultRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_GetResultRequest, _diffmesh_scheduler_v1_GetResultRequest__Output>
        GetResultResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_GetResultResponse, _diffmesh_scheduler_v1_GetResultResponse__Output>
        GetStatusRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_GetStatusRequest, _diffmesh_scheduler_v1_GetStatusRequest__Output>
        GetStatusResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_GetStatusResponse, _diffmesh_scheduler_v1_GetStatusResponse__Output>
        ListModelsRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_ListModelsRequest, _diffmesh_scheduler_v1_ListModelsRequest__Output>
        ListModelsResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_ListModelsResponse, _diffmesh_scheduler_v1_ListModelsResponse__Output>
        Modality: EnumTypeDefinition
        ModelInfo: MessageTypeDefinition<_diffmesh_scheduler_v1_ModelInfo, _diffmesh_scheduler_v1_ModelInfo__Output>
        PoolInstance: MessageTypeDefinition<_diffmesh_scheduler_v1_PoolInstance, _diffmesh_scheduler_v1_PoolInstance__Output>
        PoolStatus: MessageTypeDefinition<_diffmesh_scheduler_v1_PoolStatus, _diffmesh_scheduler_v1_PoolStatus__Output>
        RecentRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_RecentRequest, _diffmesh_scheduler_v1_RecentRequest__Output>
        ResultHeader: MessageTypeDefinition<_diffmesh_scheduler_v1_ResultHeader, _diffmesh_scheduler_v1_ResultHeader__Output>
        /**
         * The public entry point of diffmesh: accepts generation requests, runs them
         * through their model's execution plan and reports their progress.
         * 
         * HTTP paths live under `/api/v1/`; `/v1/` is left to the OpenAI-compatible
         * endpoints of the gateway.
         */
        SchedulerService: SubtypeConstructor<typeof grpc.Client, _diffmesh_scheduler_v1_SchedulerServiceClient> & { service: _diffmesh_scheduler_v1_SchedulerServiceDefinition }
        SessionAnswer: MessageTypeDefinition<_diffmesh_scheduler_v1_SessionAnswer, _diffmesh_scheduler_v1_SessionAnswer__Output>
        SessionRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_SessionRequest, _diffmesh_scheduler_v1_SessionRequest__Output>
        SessionResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_SessionResponse, _diffmesh_scheduler_v1_SessionResponse__Output>
        SubmitRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_SubmitRequest, _diffmesh_scheduler_v1_SubmitRequest__Output>
        SubmitResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_SubmitResponse, _diffmesh_scheduler_v1_SubmitResponse__Output>
        WatchRequest: MessageTypeDefinition<_diffmesh_scheduler_v1_WatchRequest, _diffmesh_scheduler_v1_WatchRequest__Output>
        WatchResponse: MessageTypeDefinition<_diffmesh_scheduler_v1_WatchResponse, _diffmesh_scheduler_v1_WatchResponse__Output>
      }
    }
  }
  google: {
    api: {
      CustomHttpPattern: MessageTypeDefinition<_google_api_CustomHttpPattern, _google_api_CustomHttpPattern__Output>
      Http: MessageTypeDefinition<_google_api_Http, _google_api_Http__Output>
      HttpRule: MessageTypeDefinition<_google_api_HttpRule, _google_api_HttpRule__Output>
    }
    protobuf: {
      DescriptorProto: MessageTypeDefinition<_google_protobuf_DescriptorProto, _google_protobuf_DescriptorProto__Output>
      Edition: EnumTypeDefinition
      EnumDescriptorProto: MessageTypeDefinition<_google_protobuf_EnumDescriptorProto, _google_protobuf_EnumDescriptorProto__Output>
      EnumOptions: MessageTypeDefinition<_google_protobuf_EnumOptions, _google_protobuf_EnumOptions__Output>
      EnumValueDescriptorProto: MessageTypeDefinition<_google_protobuf_EnumValueDescriptorProto, _google_protobuf_EnumValueDescriptorProto__Output>
      EnumValueOptions: MessageTypeDefinition<_google_protobuf_EnumValueOptions, _google_protobuf_EnumValueOptions__Output>
      ExtensionRangeOptions: MessageTypeDefinition<_google_protobuf_ExtensionRangeOptions, _google_protobuf_ExtensionRangeOptions__Output>
      FeatureSet: MessageTypeDefinition<_google_protobuf_FeatureSet, _google_protobuf_FeatureSet__Output>
      FeatureSetDefaults: MessageTypeDefinition<_google_protobuf_FeatureSetDefaults, _google_protobuf_FeatureSetDefaults__Output>
      FieldDescriptorProto: MessageTypeDefinition<_google_protobuf_FieldDescriptorProto, _google_protobuf_FieldDescriptorProto__Output>
      FieldOptions: MessageTypeDefinition<_google_protobuf_FieldOptions, _google_protobuf_FieldOptions__Output>
      FileDescriptorProto: MessageTypeDefinition<_google_protobuf_FileDescriptorProto, _google_protobuf_FileDescriptorProto__Output>
      FileDescriptorSet: MessageTypeDefinition<_google_protobuf_FileDescriptorSet, _google_protobuf_FileDescriptorSet__Output>
      FileOptions: MessageTypeDefinition<_google_protobuf_FileOptions, _google_protobuf_FileOptions__Output>
      GeneratedCodeInfo: MessageTypeDefinition<_google_protobuf_GeneratedCodeInfo, _google_protobuf_GeneratedCodeInfo__Output>
      MessageOptions: MessageTypeDefinition<_google_protobuf_MessageOptions, _google_protobuf_MessageOptions__Output>
      MethodDescriptorProto: MessageTypeDefinition<_google_protobuf_MethodDescriptorProto, _google_protobuf_MethodDescriptorProto__Output>
      MethodOptions: MessageTypeDefinition<_google_protobuf_MethodOptions, _google_protobuf_MethodOptions__Output>
      OneofDescriptorProto: MessageTypeDefinition<_google_protobuf_OneofDescriptorProto, _google_protobuf_OneofDescriptorProto__Output>
      OneofOptions: MessageTypeDefinition<_google_protobuf_OneofOptions, _google_protobuf_OneofOptions__Output>
      ServiceDescriptorProto: MessageTypeDefinition<_google_protobuf_ServiceDescriptorProto, _google_protobuf_ServiceDescriptorProto__Output>
      ServiceOptions: MessageTypeDefinition<_google_protobuf_ServiceOptions, _google_protobuf_ServiceOptions__Output>
      SourceCodeInfo: MessageTypeDefinition<_google_protobuf_SourceCodeInfo, _google_protobuf_SourceCodeInfo__Output>
      SymbolVisibility: EnumTypeDefinition
      Timestamp: MessageTypeDefinition<_google_protobuf_Timestamp, _google_protobuf_Timestamp__Output>
      UninterpretedOption: MessageTypeDefinition<_google_protobuf_UninterpretedOption, _google_protobuf_UninterpretedOption__Output>
    }
    rpc: {
      Code: EnumTypeDefinition
    }
  }
}

