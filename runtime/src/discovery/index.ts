export { INSTANCE_STAGES } from './types.js';
export type {
  Discovery,
  DiscoveryEvent,
  DiscoveryListener,
  Instance,
  InstanceFilter,
  InstanceInfo,
  InstanceLoad,
  InstanceRegistration,
  InstanceStage,
  LoadFn,
  Registration,
  SubscribeOptions,
} from './types.js';
export { RESERVED_METADATA_KEYS, matchesFilter, matchesVersion } from './instance.js';
export { MemoryDiscovery } from './memory.js';
export type { MemoryDiscoveryOptions } from './memory.js';
export { DEFAULT_DISCOVERY_SUBJECT_PREFIX, LOAD_ENDPOINT, NatsDiscovery } from './nats.js';
export type { NatsDiscoveryConnectOptions, NatsDiscoveryOptions } from './nats.js';
export { DISCOVERY_BACKENDS, DiscoveryConfigSchema, createDiscovery } from './factory.js';
export type { DiscoveryBackend, DiscoveryConfig, DiscoveryConfigInput } from './factory.js';
export { NatsServerNotFoundError, findNatsServer, startNatsServer } from './nats-server.js';
export type { RunningNatsServer, StartNatsServerOptions } from './nats-server.js';
