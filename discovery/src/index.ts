/**
 * @diffmesh/discovery: how diffmesh services find each other. NATS micro-service
 * registration and discovery (`$SRV.PING/INFO/STATS`) and the in-process backend.
 */
export { createDiscovery, DISCOVERY_BACKENDS, DiscoveryConfigSchema, natsDiscoveryConfigOf } from './factory.js';
export type { DiscoveryBackend, DiscoveryConfig, DiscoveryConfigInput } from './factory.js';
export { matchesFilter, matchesVersion, RESERVED_METADATA_KEYS } from './instance.js';
export { MemoryDiscovery } from './memory.js';
export type { MemoryDiscoveryOptions } from './memory.js';
export { DEFAULT_DISCOVERY_SUBJECT_PREFIX, LOAD_ENDPOINT, NatsDiscovery } from './nats.js';
export type { NatsDiscoveryConnectOptions, NatsDiscoveryOptions } from './nats.js';
export { createNkeyUser, natsAuthenticatorFromFile, natsCredentialsKind, nkeyPublicKey } from './nats-credentials.js';
export type { NatsCredentialsKind, NkeyUser } from './nats-credentials.js';
export { natsConnectionOptions, natsInboxPrefix, natsTlsConfigFields, natsTlsConfigMappings, natsTlsOf } from './nats-connection.js';
export type { NatsTlsFiles } from './nats-connection.js';
export { INSTANCE_STAGES } from './types.js';
export type {
  Discovery,
  DiscoveryEvent,
  DownReason,
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
