export { SchedulerConfigSchema, schedulerConfig } from './config.js';
export type { SchedulerConfig } from './config.js';
export { EventLog } from './event-log.js';
export { DEFAULT_TENANT, DEFAULT_TENANT_POLICY, FairShare, directoryPolicy } from './fair-share.js';
export type { TenantLimits, TenantPolicy } from './fair-share.js';
export { nominalCost, TaskCosts } from './task-cost.js';
export { parseStageCosts, planPools, PoolPlanError } from './pool-planning.js';
export type { PlannedPool, PlannedStage, PoolPlan, PoolPlanInput, StageCostInput, WholePipeline } from './pool-planning.js';
export { TenantQuotas } from './tenant-quotas.js';
export type { TenantLimitName } from './tenant-quotas.js';
export { submitWithInputImage } from './input-image.js';
export { LocalInstance } from './local-instance.js';
export { followDiscovery } from './membership.js';
export { SchedulerMetrics } from './metrics.js';
export type { SchedulerMetricsOptions } from './metrics.js';
export type { MembershipOptions } from './membership.js';
export { RemoteInstance } from './remote-instance.js';
export { INPUT_IMAGE, requestPlan } from './request-plan.js';
export type { RemoteInstanceInfo, RemoteInstanceOptions } from './remote-instance.js';
export { DEFAULT_LEASE_MS, DEFAULT_MAX_RETAINED, DEFAULT_RECENT_REQUESTS, DEFAULT_STRANDED_TIMEOUT_MS, Scheduler } from './scheduler.js';
export type { InstanceView, PoolView, SchedulerLimits, SchedulerOptions, SchedulerPhase } from './scheduler.js';
export { startSchedulerService } from './server.js';
export type { RunningScheduler } from './server.js';
export { DEFAULT_EVENT_INTERVAL_MS, eventToWire, getResponse, schedulerServiceBinding, statusResponse } from './service.js';
export type { SchedulerIdentity, StreamOptions } from './service.js';
export { MAX_REQUEST_ID_CHARS, MAX_TIMEOUT_MS, TaskRefused } from './types.js';
export type { ExecuteHooks, GenerateRequest, RequestState, StageInstance, StageTiming } from './types.js';
export { describeFrameRule, resolveParams } from './plans/params.js';
export type { GenerationParamsInput, ResolveParamsOptions } from './plans/params.js';
export { DEFAULT_PLANS_FILE, loadPlanRegistry, parsePlanRegistry, PlanRegistry, toExecutionPlan } from './plans/registry.js';
export type { LoadPlanRegistryOptions } from './plans/registry.js';
export { expandDirectoryEntries } from './plans/directory-entries.js';
export {
  FrameRuleSchema,
  IMAGE_MODALITIES,
  MODALITIES,
  PlanConstraintsSchema,
  PlanDefaultsSchema,
  PlanEntrySchema,
  PlanFileSchema,
  PlanStageSchema,
} from './plans/schema.js';
export type { FrameRule, Modality, PlanConstraints, PlanDefaults, PlanEntry, PlanEntryInput, PlanStageConfig } from './plans/schema.js';
export { createSchedulerStore } from './storage/factory.js';
export type { StoreConfig } from './storage/factory.js';
export { JetStreamStore } from './storage/jetstream.js';
export type { JetStreamStoreOptions } from './storage/jetstream.js';
export { MemoryStore } from './storage/memory.js';
export { RedisStore } from './storage/redis.js';
export type { RedisStoreOptions } from './storage/redis.js';
export { SqliteStore } from './storage/sqlite.js';
export type { SqliteStoreOptions } from './storage/sqlite.js';
export type { MemoryStoreOptions } from './storage/memory.js';
export { STORE_BACKENDS, isTerminalStatus, itemId, tenantRank } from './storage/types.js';
export type {
  Lease,
  LeaseFit,
  LeaseQuery,
  Mutation,
  QueueEffects,
  QueueItem,
  QueuedKind,
  RecordChange,
  RequestRecord,
  SchedulerStore,
  StoreBackend,
  StoreOptions,
} from './storage/types.js';
export type { ForeignInstance } from './instances.js';
