// Original file: proto/diffmesh/common/v1/object.proto

/**
 * Element type of a tensor.
 */
export const Dtype = {
  DTYPE_UNSPECIFIED: 'DTYPE_UNSPECIFIED',
  DTYPE_FLOAT32: 'DTYPE_FLOAT32',
  DTYPE_FLOAT16: 'DTYPE_FLOAT16',
  DTYPE_INT64: 'DTYPE_INT64',
  DTYPE_INT32: 'DTYPE_INT32',
  DTYPE_UINT8: 'DTYPE_UINT8',
} as const;

/**
 * Element type of a tensor.
 */
export type Dtype =
  | 'DTYPE_UNSPECIFIED'
  | 0
  | 'DTYPE_FLOAT32'
  | 1
  | 'DTYPE_FLOAT16'
  | 2
  | 'DTYPE_INT64'
  | 3
  | 'DTYPE_INT32'
  | 4
  | 'DTYPE_UINT8'
  | 5

/**
 * Element type of a tensor.
 */
export type Dtype__Output = typeof Dtype[keyof typeof Dtype]
