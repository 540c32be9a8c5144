// Original file: proto/diffmesh/tensor/v1/tensor.proto

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';
import type { ErrorDetail as _diffmesh_common_v1_ErrorDetail, ErrorDetail__Output as _diffmesh_common_v1_ErrorDetail__Output } from '../../../diffmesh/common/v1/ErrorDetail.js';
import type { Long } from '@grpc/proto-loader';

export interface PutObjectsResponse {
  'sequence'?: (number | string | Long);
  'ref'?: (_diffmesh_common_v1_ObjectRef | null);
  'error'?: (_diffmesh_common_v1_ErrorDetail | null);
  'result'?: "ref"|"error";
}

export interface PutObjectsResponse__Output {
  'sequence': (string);
  'ref'?: (_diffmesh_common_v1_ObjectRef__Output | null);
  'error'?: (_diffmesh_common_v1_ErrorDetail__Output | null);
  'result'?: "ref"|"error";
}
