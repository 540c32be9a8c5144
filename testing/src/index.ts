/**
 * @diffmesh/testing: launchers and helpers shared by tests, benchmarks and `diffmesh up`:
 * the nats-server, redis-server and S3-protocol server launchers, the process supervisor,
 * network-namespace "nodes" joined by veth links, the `rejection`/`thrown` assertions of
 * error paths, and onnxruntime GPU provider files in the layouts of the packages that carry them.
 */
export { rejection, thrown } from './errors.js';
export { findNatsServer, natsAuthorizationConfig, NatsServerNotFoundError, natsTlsConfig, startNatsServer } from './nats-server.js';
export type { NatsPermissions, NatsServerTls, NatsSubjectRule, RunningNatsServer, StartNatsServerOptions } from './nats-server.js';
export { findRedisServer, RedisServerNotFoundError, startRedisServer } from './redis-server.js';
export type { RunningRedisServer, StartRedisServerOptions } from './redis-server.js';
export { startS3Server } from './s3-server.js';
export type { RunningS3Server, StartS3ServerOptions } from './s3-server.js';
export { Supervisor } from './supervisor.js';
export type { ManagedProcess, ProcessSpec, RestartPolicy, SupervisorEvent, SupervisorOptions } from './supervisor.js';
export { createNodeNetwork, netnsSupport } from './netns.js';
export type { CreateNodeNetworkOptions, NetnsNode, NetnsSupport, NodeNetwork } from './netns.js';
export { elfSharedLibrary, providerLibraries, writeProviderPackage } from './onnxruntime-provider-files.js';
export { testStageTask } from './stage-task.js';
export type { TestStageTask } from './stage-task.js';
