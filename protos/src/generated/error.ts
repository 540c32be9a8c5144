import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from './diffmesh/common/v1/ErrorDetail.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  diffmesh: {
    common: {
      v1: {
        ErrorDetail: MessageTypeDefinition<_diffmesh_common_v1_ErrorDetail, _diffmesh_common_v1_ErrorDetail__Output>
        ErrorReason: EnumTypeDefinition
      }
    }
  }
  google: {
    rpc: {
      Code: EnumTypeDefinition
    }
  }
}

