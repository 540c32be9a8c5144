// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type { PutHeader as _diffmesh_tensor_v1_PutHeader, PutHeader__Output as _diffmesh_tensor_v1_PutHeader__Output } from '../../../diffmesh/tensor/v1/PutHeader.js';
import type { Chunk as _diffmesh_tensor_v1_Chunk, Chunk__Output as _diffmesh_tensor_v1_Chunk__Output } from '../../../diffmesh/tensor/v1/Chunk.js';

export interface PutRequest {
  'header'?: (_diffmesh_tensor_v1_PutHeader | null);
  'chunk'?: (_diffmesh_tensor_v1_Chunk | null);
  'kind'?: "header"|"chunk";
}

export interface PutRequest__Output {
  'header'?: (_diffmesh_tensor_v1_PutHeader__Output | null);
  'chunk'?: (_diffmesh_tensor_v1_Chunk__Output | null);
  'kind'?: "header"|"chunk";
}
