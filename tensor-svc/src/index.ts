// The public surface of @diffmesh/tensor-svc.
export {
  MAX_CHUNK_BYTES,
  MIN_CHUNK_BYTES,
  TensorSvcConfigSchema,
  loadTensorSvcConfig,
  resolveTensorSvcConfig,
  tensorSvcConfig,
} from './config.js';
export type { ResolvedTensorSvcConfig, TensorSvcConfig, TensorSvcConfigInput } from './config.js';
export { runTensorSvc } from './main.js';
export type { OnTensorServiceReady, RunTensorSvcOptions } from './main.js';
export { TENSOR_METHODS, TensorMetrics, readMetric } from './metrics.js';
export type { TensorMethod, TensorMetricsSnapshot } from './metrics.js';
export { startTensorService } from './server.js';
export type { RunningTensorService, StartTensorServiceOptions, TensorServiceInfo } from './server.js';
export { TensorServiceImpl, parsePutHeader } from './service.js';
export type { TensorOwner, TensorServiceOptions } from './service.js';
export { DIR_MARKER, ObjectReader, PutWriter, TieredStore, checkObjectId } from './store.js';
export type { ObjectHeader, StoreUsage, StoredObjectInfo, Tier, TierUsage, TieredStoreOptions } from './store.js';
