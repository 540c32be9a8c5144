// The public surface of @diffmesh/tensor-svc.
export {
  MAX_CHUNK_BYTES,
  MIN_CHUNK_BYTES,
  TENSOR_SVC_BACKENDS,
  TensorSvcConfigSchema,
  loadTensorSvcConfig,
  resolveTensorSvcConfig,
  tensorSvcConfig,
  tensorSvcEnv,
} from './config.js';
export type { ResolvedTensorSvcConfig, TensorSvcBackend, TensorSvcConfig, TensorSvcConfigInput, TensorSvcEnv } from './config.js';
export type { ObjectSource, ObjectStore, ObjectTier, ObjectWriter } from './object-store.js';
export { WRITE_THROUGH_MODES, WriteThroughStore, writesThrough } from './write-through.js';
export type { WriteThroughMode, WriteThroughPolicy, WriteThroughStoreOptions } from './write-through.js';
export { DurableBackedStore } from './durable-backed-store.js';
export type { DurableBackedStoreOptions } from './durable-backed-store.js';
export { META_DIR } from './sidecar.js';
export { runTensorSvc } from './main.js';
export type { OnTensorServiceReady, RunTensorSvcOptions } from './main.js';
export { TENSOR_METHODS, TensorMetrics, readMetric } from './metrics.js';
export type { TensorMethod, TensorMetricsSnapshot } from './metrics.js';
export { startTensorService } from './server.js';
export type { RunningTensorService, StartTensorServiceOptions, TensorServiceInfo } from './server.js';
export { TensorServiceImpl, parsePutHeader } from './service.js';
export type { TensorOwner, TensorServiceOptions } from './service.js';
export { TieredStore } from './store.js';
export type { StoreUsage, StoredObjectInfo, TieredStoreOptions } from './store.js';
export { checkObjectId } from './object-header.js';
export type { ObjectHeader } from './object-header.js';
export type { Tier, TierUsage } from './placement.js';
export { DIR_MARKER } from './store-directories.js';
export { PutWriter } from './put-writer.js';
export { ObjectReader } from './object-reader.js';
