// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';

export interface PutResponse {
  'ref'?: (_diffmesh_common_v1_ObjectRef | null);
}

export interface PutResponse__Output {
  'ref': (_diffmesh_common_v1_ObjectRef__Output | null);
}
