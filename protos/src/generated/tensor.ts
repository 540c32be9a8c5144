import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from './diffmesh/common/v1/ErrorDetail.js';
import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from './diffmesh/common/v1/ObjectRef.js';
import type { Chunk as _diffmesh_tensor_v1_Chunk, Chunk__Output as _diffmesh_tensor_v1_Chunk__Output } from './diffmesh/tensor/v1/Chunk.js';
import type { DeleteRequest as _diffmesh_tensor_v1_DeleteRequest, DeleteRequest__Output as _diffmesh_tensor_v1_DeleteRequest__Output } from './diffmesh/tensor/v1/DeleteRequest.js';
import type { DeleteResponse as _diffmesh_tensor_v1_DeleteResponse, DeleteResponse__Output as _diffmesh_tensor_v1_DeleteResponse__Output } from './diffmesh/tensor/v1/DeleteResponse.js';
import type { GetRequest as _diffmesh_tensor_v1_GetRequest, GetRequest__Output as _diffmesh_tensor_v1_GetRequest__Output } from './diffmesh/tensor/v1/GetRequest.js';
import type { GetResponse as _diffmesh_tensor_v1_GetResponse, GetResponse__Output as _diffmesh_tensor_v1_GetResponse__Output } from './diffmesh/tensor/v1/GetResponse.js';
import type { PutHeader as _diffmesh_tensor_v1_PutHeader, PutHeader__Output as _diffmesh_tensor_v1_PutHeader__Output } from './diffmesh/tensor/v1/PutHeader.js';
import type { PutObjectsRequest as _diffmesh_tensor_v1_PutObjectsRequest, PutObjectsRequest__Output as _diffmesh_tensor_v1_PutObjectsRequest__Output } from './diffmesh/tensor/v1/PutObjectsRequest.js';
import type { PutObjectsResponse as _diffmesh_tensor_v1_PutObjectsResponse, PutObjectsResponse__Output as _diffmesh_tensor_v1_PutObjectsResponse__Output } from './diffmesh/tensor/v1/PutObjectsResponse.js';
import type { PutRequest as _diffmesh_tensor_v1_PutRequest, PutRequest__Output as _diffmesh_tensor_v1_PutRequest__Output } from './diffmesh/tensor/v1/PutRequest.js';
import type { PutResponse as _diffmesh_tensor_v1_PutResponse, PutResponse__Output as _diffmesh_tensor_v1_PutResponse__Output } from './diffmesh/tensor/v1/PutResponse.js';
import type { StatRequest as _diffmesh_tensor_v1_StatRequest, StatRequest__Output as _diffmesh_tensor_v1_StatRequest__Output } from './diffmesh/tensor/v1/StatRequest.js';
import type { StatResponse as _diffmesh_tensor_v1_StatResponse, StatResponse__Output as _diffmesh_tensor_v1_StatResponse__Output } from './diffmesh/tensor/v1/StatResponse.js';
import type { TensorServiceClient as _diffmesh_tensor_v1_TensorServiceClient, TensorServiceDefinition as _diffmesh_tensor_v1_TensorServiceDefinition } from './diffmesh/tensor/v1/TensorService.js';
import type { TouchRequest as _diffmesh_tensor_v1_TouchRequest, TouchRequest__Output as _diffmesh_tensor_v1_TouchRequest__Output } from './diffmesh/tensor/v1/TouchRequest.js';
import type { TouchResponse as _diffmesh_tensor_v1_TouchResponse, TouchResponse__Output as _diffmesh_tensor_v1_TouchResponse__Output } from './diffmesh/tensor/v1/TouchResponse.js';
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
        Dtype: EnumTypeDefinition
        ErrorDetail: MessageTypeDefinition<_diffmesh_common_v1_ErrorDetail, _diffmesh_common_v1_ErrorDetail__Output>
        ErrorReason: EnumTypeDefinition
        ObjectRef: MessageTypeDefinition<_diffmesh_common_v1_ObjectRef, _diffmesh_common_v1_ObjectRef__Output>
      }
    }
    tensor: {
      v1: {
        Chunk: MessageTypeDefinition<_diffmesh_tensor_v1_Chunk, _diffmesh_tensor_v1_Chunk__Output>
        DeleteRequest: MessageTypeDefinition<_diffmesh_tensor_v1_DeleteRequest, _diffmesh_tensor_v1_DeleteRequest__Output>
        DeleteResponse: MessageTypeDefinition<_diffmesh_tensor_v1_DeleteResponse, _diffmesh_tensor_v1_DeleteResponse__Output>
        GetRequest: MessageTypeDefinition<_diffmesh_tensor_v1_GetRequest, _diffmesh_tensor_v1_GetRequest__Output>
        GetResponse: MessageTypeDefinition<_diffmesh_tensor_v1_GetResponse, _diffmesh_tensor_v1_GetResponse__Output>
        PutHeader: MessageTypeDefinition<_diffmesh_tensor_v1_PutHeader, _diffmesh_tensor_v1_PutHeader__Output>
        PutObjectsRequest: MessageTypeDefinition<_diffmesh_tensor_v1_PutObjectsRequest, _diffmesh_tensor_v1_PutObjectsRequest__Output>
        PutObjectsResponse: MessageTypeDefinition<_diffmesh_tensor_v1_PutObjectsResponse, _diffmesh_tensor_v1_PutObjectsResponse__Output>
        PutRequest: MessageTypeDefinition<_diffmesh_tensor_v1_PutRequest, _diffmesh_tensor_v1_PutRequest__Output>
        PutResponse: MessageTypeDefinition<_diffmesh_tensor_v1_PutResponse, _diffmesh_tensor_v1_PutResponse__Output>
        StatRequest: MessageTypeDefinition<_diffmesh_tensor_v1_StatRequest, _diffmesh_tensor_v1_StatRequest__Output>
        StatResponse: MessageTypeDefinition<_diffmesh_tensor_v1_StatResponse, _diffmesh_tensor_v1_StatResponse__Output>
        /**
         * The node-local object store for tensors. Bytes move in chunked streams
         * with flow-control backpressure.
         */
        TensorService: SubtypeConstructor<typeof grpc.Client, _diffmesh_tensor_v1_TensorServiceClient> & { service: _diffmesh_tensor_v1_TensorServiceDefinition }
        TouchRequest: MessageTypeDefinition<_diffmesh_tensor_v1_TouchRequest, _diffmesh_tensor_v1_TouchRequest__Output>
        TouchResponse: MessageTypeDefinition<_diffmesh_tensor_v1_TouchResponse, _diffmesh_tensor_v1_TouchResponse__Output>
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

