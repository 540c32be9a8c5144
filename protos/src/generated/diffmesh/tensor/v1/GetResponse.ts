// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';
import type { Chunk as _diffmesh_tensor_v1_Chunk, Chunk__Output as _diffmesh_tensor_v1_Chunk__Output } from '../../../diffmesh/tensor/v1/Chunk.js';

export interface GetResponse {
  'header'?: (_diffmesh_common_v1_ObjectRef | null);
  'chunk'?: (_diffmesh_tensor_v1_Chunk | null);
  'kind'?: "header"|"chunk";
}

export interface GetResponse__Output {
  'header'?: (_diffmesh_common_v1_ObjectRef__Output | null);
  'chunk'?: (_diffmesh_tensor_v1_Chunk__Output | null);
  'kind'?: "header"|"chunk";
}
