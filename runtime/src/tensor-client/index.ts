export { ByteBudget } from './budget.js';
export { DEFAULT_CHUNK_BYTES, EXPIRES_AT_METADATA, TensorServiceClient, formatChecksum } from './client.js';
export type {
  GetObjectOptions,
  GetObjectResult,
  PutObjectHeader,
  TensorCallOptions,
  TensorServiceClientOptions,
} from './client.js';
export { INCOMING_DIR, SHM_ROOT, defaultShmDir, incomingPath, isIncomingFileName, objectFileName, objectPath } from './paths.js';
export { RemoteTensorStore } from './remote.js';
export type { RemoteTensorStoreOptions, RemoteTensorStoreStats, TensorRetryOptions } from './remote.js';
