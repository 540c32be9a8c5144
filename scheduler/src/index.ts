export { SchedulerConfigSchema, schedulerConfig } from './config.js';
export type { SchedulerConfig } from './config.js';
export { EventLog } from './event-log.js';
export { LocalInstance } from './local-instance.js';
export { followDiscovery } from './membership.js';
export { SchedulerMetrics } from './metrics.js';
/** Moved to @diffmesh/runtime; re-exported for existing callers. */
export { startMetricsEndpoint } from '@diffmesh/runtime';
export type { MembershipOptions } from './membership.js';
export { RemoteInstance } from './remote-instance.js';
export type { RemoteInstanceInfo, RemoteInstanceOptions } from './remote-instance.js';
export { DEFAULT_MAX_RETAINED, DEFAULT_RECENT_REQUESTS, DEFAULT_STRANDED_TIMEOUT_MS, Scheduler } from './scheduler.js';
export type { InstanceView, PoolView, QueuedTask, SchedulerLimits, SchedulerOptions } from './scheduler.js';
export { startSchedulerService } from './server.js';
export type { RunningScheduler } from './server.js';
export { DEFAULT_EVENT_INTERVAL_MS, eventFromWire, eventToWire, getResponse, schedulerServiceBinding, statusResponse } from './service.js';
export type { SchedulerIdentity, StreamOptions } from './service.js';
export { MAX_REQUEST_ID_CHARS, MAX_TIMEOUT_MS, TaskRefused, isTerminal } from './types.js';
export type {
  ExecuteHooks,
  GenerateRequest,
  RequestEvent,
  RequestState,
  StageInstance,
  StageTiming,
} from './types.js';
