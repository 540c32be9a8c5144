import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from './diffmesh/common/v1/ObjectRef.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from './google/protobuf/Timestamp.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  diffmesh: {
    common: {
      v1: {
        Dtype: EnumTypeDefinition
        ObjectRef: MessageTypeDefinition<_diffmesh_common_v1_ObjectRef, _diffmesh_common_v1_ObjectRef__Output>
      }
    }
  }
  google: {
    protobuf: {
      Timestamp: MessageTypeDefinition<_google_protobuf_Timestamp, _google_protobuf_Timestamp__Output>
    }
  }
}

