/**
 * @diffmesh/tensor-client: the TensorStore interface and its client-side backends — the
 * in-memory store, inline refs for small objects, the remote store that talks to a
 * tensor-svc (gRPC streams, same-node shared memory), the durable redis and S3-compatible
 * stores, and the routed store that reads each ref where it lives.
 */
export { float16Bits, float16Value, fromFloat16, toFloat16 } from './float16.js';
export { ByteBudget } from './byte-budget.js';
export { createTensorStore, TENSOR_STORE_BACKENDS, TensorStoreConfigSchema } from './factory.js';
export type { CreateTensorStoreOptions, TensorStoreBackend, TensorStoreConfig, TensorStoreConfigInput } from './factory.js';
export { DEFAULT_INLINE_MAX_BYTES, InlineTensorStore } from './inline-store.js';
export { DEFAULT_REDIS_PREFIX, DURABLE_KINDS, DurableLocationError, parseDurableLocation } from './durable-location.js';
export type { DurableKind, DurableLocation, RedisLocation, S3Location } from './durable-location.js';
export { DEFAULT_DURABLE_TTL_MS, readRange } from './durable-store.js';
export type { DurableReader, DurableStore, DurableStoreCommonOptions } from './durable-store.js';
export { DurableStores, durableSettingsFromEnv, openDurableStore } from './durable-stores.js';
export type { DurableSettings } from './durable-stores.js';
export { DEFAULT_REDIS_CHUNK_BYTES, RedisTensorStore } from './redis-store.js';
export type { RedisTensorStoreOptions } from './redis-store.js';
export { DEFAULT_S3_PART_BYTES, S3TensorStore } from './s3-store.js';
export type { S3TensorStoreOptions, S3TensorStoreStats } from './s3-store.js';
export { RoutedTensorStore } from './routed-store.js';
export type { RoutedTensorStoreOptions, RoutedTensorStoreStats } from './routed-store.js';
export { scopedPutOptions, withPutOptions } from './put-scope.js';
export { formatBytes, MemoryTensorStore } from './memory-store.js';
export type { MemoryTensorStoreOptions } from './memory-store.js';
export { RemoteTensorStore } from './remote-store.js';
export type { RemoteTensorStoreOptions, RemoteTensorStoreStats, TensorRetryOptions } from './remote-store.js';
export { defaultShmDir, INCOMING_DIR, incomingPath, isIncomingFileName, objectFileName, objectPath, SHM_ROOT } from './shm-paths.js';
export { byteLengthOf, checksumOf, DTYPE_BYTES, elementCount, float32View, rangeOf, tensorView, toBytes } from './tensor-bytes.js';
export type { DtypeArrays } from './tensor-bytes.js';
export { DEFAULT_CHUNK_BYTES, EXPIRES_AT_METADATA, formatChecksum, TensorServiceClient } from './tensor-service-client.js';
export type {
  GetObjectOptions,
  GetObjectResult,
  PutObjectHeader,
  TensorCallOptions,
  TensorServiceClientOptions,
} from './tensor-service-client.js';
export type {
  GetOptions,
  ObjectInfo,
  ObjectKey,
  PutOptions,
  PutTensorInput,
  StoredTensor,
  TensorStore,
  TensorStoreUsage,
} from './tensor-store.js';
