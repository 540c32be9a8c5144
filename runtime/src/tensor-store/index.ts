export {
  DTYPE_BYTES,
  byteLengthOf,
  checksumOf,
  elementCount,
  float32View,
  tensorView,
  toBytes,
} from './bytes.js';
export type { DtypeArrays } from './bytes.js';
export { TENSOR_STORE_BACKENDS, TensorStoreConfigSchema, createTensorStore } from './factory.js';
export type {
  CreateTensorStoreOptions,
  TensorStoreBackend,
  TensorStoreConfig,
  TensorStoreConfigInput,
} from './factory.js';
export { MemoryTensorStore, formatBytes } from './memory.js';
export type { MemoryTensorStoreOptions } from './memory.js';
export type {
  ObjectInfo,
  ObjectKey,
  PutOptions,
  PutTensorInput,
  StoredTensor,
  TensorStore,
  TensorStoreUsage,
} from './types.js';
export { DEFAULT_INLINE_MAX_BYTES, InlineTensorStore } from './inline.js';
