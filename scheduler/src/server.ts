import { randomUUID } from 'node:crypto';
import {
  Code,
  DiffmeshError,
  GrpcServer,
  advertisedAddress,
  hostOf,
  loadTlsFiles,
  startMetricsEndpoint,
  TenantDirectory,
  type Logger,
} from '@diffmesh/core';
import { DurableStores, InlineTensorStore, RemoteTensorStore, RoutedTensorStore, durableSettingsFromEnv } from '@diffmesh/tensor-client';
import { createDiscovery, natsDiscoveryConfigOf, natsTlsOf, type Discovery, type Registration } from '@diffmesh/discovery';
import { loadPlanRegistry } from './plans/registry.js';
import type { SchedulerConfig } from './config.js';
import { followDiscovery } from './membership.js';
import { SchedulerMetrics } from './metrics.js';
import { directoryPolicy } from './fair-share.js';
import { Scheduler } from './scheduler.js';
import { createSchedulerStore } from './storage/factory.js';
import type { SchedulerStore } from './storage/types.js';
import type { SchedulerLimits } from './limits.js';
import { schedulerServiceBinding } from './service.js';

/** A running scheduler service. */
export interface RunningScheduler {
  address: string;
  instanceId: string;
  scheduler: Scheduler;
  /** `http://host:port/metrics` when the endpoint is on. */
  metricsUrl?: string;
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts the scheduler service: the plan registry, per-pool queues, the SchedulerService
 * gRPC API with health and reflection, and — with NATS configured — discovery of stage
 * instances (each gets a dispatch stream) and its own registration as `scheduler`.
 */
export async function startSchedulerService(
  config: SchedulerConfig,
  log: Logger,
  version: string,
  /** `REDIS_URL` and `AWS_*`: how to reach the durable copies of objects whose owner is gone. */
  env: Record<string, string | undefined> = {},
): Promise<RunningScheduler> {
  const instanceId = config.instanceId || `scheduler-${randomUUID().slice(0, 8)}`;
  const registry = await loadPlanRegistry(config.plansFile || undefined, { directories: config.modelDirectories });
  const tls = loadTlsFiles(config.tls);
  const store = tensorStoreOf(config, log, tls, env);
  const requests = await requestStoreOf(config, log, env);
  // Read before the scheduler: their weights and limits are its fair share and quotas.
  const tenants = TenantDirectory.fromFile(config.tenantsFile || undefined);
  let metrics: SchedulerMetrics | undefined;
  const scheduler = new Scheduler({
    requests,
    registry,
    store,
    log,
    limits: limitsOf(config),
    id: instanceId,
    fairShare: config.fairShare,
    tenants: directoryPolicy(tenants),
    onEvent: (e, state) => metrics?.observe(e, state),
    onRefused: (tenant, err) => metrics?.refused(tenant, err),
    onAdapterDispatch: (pool, held) => metrics?.adapterDispatch(pool, held),
  });
  await scheduler.start();
  metrics = new SchedulerMetrics(scheduler, { isTenant: (t) => tenants.get(t) !== undefined });
  const endpoint = config.metricsListen
    ? await startMetricsEndpoint(metrics.registry, config.metricsListen, log, config.advertiseAddress && hostOf(config.advertiseAddress))
    : undefined;
  if (endpoint) log.info({ url: endpoint.url }, 'metrics endpoint listening');
  const discovery: Discovery = await createDiscovery(config.natsUrl ? natsDiscoveryConfigOf(config) : { backend: 'memory' }, log);
  const unfollow = followDiscovery(scheduler, discovery, { log, ...(tls ? { tls } : {}) });
  const unwatchTenants = tenants.watch(log);
  if (tenants.enabled)
    log.info({ file: config.tenantsFile, tenants: tenants.tenants().length }, 'tenants loaded: requests are scoped to their tenant');
  const binding = schedulerServiceBinding(
    scheduler,
    registry,
    { instanceId, version },
    { eventIntervalMs: config.eventIntervalMs, results: { store, log, ffmpegPath: config.ffmpeg }, tenants },
  );
  metrics.countSessions(() => binding.openSessions());
  const server = await GrpcServer.start({ address: config.listen, services: [binding], log, ...(tls ? { tls } : {}) });
  // What peers on other nodes dial (registered in discovery).
  const address = advertisedAddress(
    { listen: config.listen, bound: server.address, advertise: config.advertiseAddress },
    config.natsUrl ? log : undefined,
  );
  const depth = queueDepth(scheduler);
  const registration = config.natsUrl
    ? await register(discovery, scheduler, { config, instanceId, version, address, depth, metricsUrl: endpoint?.url })
    : undefined;
  let stopping: Promise<void> | undefined;
  return {
    address,
    instanceId,
    scheduler,
    ...(endpoint ? { metricsUrl: endpoint.url } : {}),
    stop(graceMs = config.drainGraceMs) {
      stopping ??= drainService(
        { server, depth, binding, registration, scheduler, unfollow, unwatchTenants, discovery, store, endpoint },
        graceMs,
      );
      return stopping;
    },
  };
}

/** What a running scheduler service stops, in order. */
interface ServiceParts {
  server: GrpcServer;
  depth: { stop(): void };
  binding: ReturnType<typeof schedulerServiceBinding>;
  registration: Registration | undefined;
  scheduler: Scheduler;
  unfollow: () => void;
  unwatchTenants: () => void;
  discovery: Discovery;
  store: InlineTensorStore;
  endpoint: { close(): Promise<void> } | undefined;
}

/**
 * Health NOT_SERVING, out of discovery, the scheduler drained (its work handed back or
 * finished), the streams still following requests ended (they go on elsewhere), then the
 * server, discovery, the tensor store and the metrics endpoint closed.
 */
async function drainService(p: ServiceParts, graceMs: number): Promise<void> {
  p.server.setServing(false);
  p.depth.stop();
  // Open sessions end as their requests do, so the server's drain does not wait on idle ones.
  p.binding.endSessions();
  await p.registration?.stop().catch(() => undefined);
  await p.scheduler.drain(graceMs);
  // What is still followed here goes on elsewhere (a shared store): its streams end with
  // UNAVAILABLE, which clients take as the cue to follow it on another scheduler.
  p.binding.endStreams(
    new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'scheduler is shutting down; follow the request on another scheduler', {
      retryAfterMs: 100,
    }),
  );
  // Those streams end at once; other calls (a result being sent) get up to 1 s.
  await p.server.drain(1000);
  p.unfollow();
  p.unwatchTenants();
  await p.discovery.close();
  await p.store.close();
  await p.endpoint?.close();
}

/**
 * The tensor store the scheduler deletes request objects through: inline refs (small objects
 * passed by value) need no delete; the rest go to their owners, and objects written through to
 * redis/S3 are deleted there too when their owner is gone.
 */
function tensorStoreOf(
  config: SchedulerConfig,
  log: Logger,
  tls: ReturnType<typeof loadTlsFiles>,
  env: Record<string, string | undefined>,
): InlineTensorStore {
  return new InlineTensorStore(
    new RoutedTensorStore({
      remote: new RemoteTensorStore({ address: config.tensorAddress, nodeId: config.nodeId, log, ...(tls ? { tls } : {}) }),
      durable: new DurableStores({ ...durableSettingsFromEnv(env), logger: log }),
      log,
    }),
  );
}

/**
 * Requests and queues, started: in this process, or in a store that outlives it and that other
 * schedulers share (the jetstream store uses the discovery NATS unless told otherwise).
 */
async function requestStoreOf(config: SchedulerConfig, log: Logger, env: Record<string, string | undefined>): Promise<SchedulerStore> {
  const requests = createSchedulerStore(
    {
      backend: config.queue,
      url: config.queueUrl || (config.queue === 'jetstream' ? config.natsUrl : config.queue === 'redis' ? (env.REDIS_URL ?? '') : ''),
      sqlitePath: config.sqlitePath,
      namespace: config.queueNamespace,
      ...(config.natsCredentials ? { natsCredentials: config.natsCredentials } : {}),
      ...(natsTlsOf(config) ? { natsTls: natsTlsOf(config)! } : {}),
    },
    { retentionMs: config.retentionMs, maxRetained: config.maxRetained, leaseMs: config.leaseMs },
  );
  await requests.start();
  log.info({ queue: config.queue, ...(config.queue === 'sqlite' ? { file: config.sqlitePath } : {}) }, 'scheduler store ready');
  return requests;
}

/** The scheduler's limits and policies, from its configuration. */
function limitsOf(config: SchedulerConfig): SchedulerLimits {
  return {
    maxQueueLength: config.maxQueueLength,
    maxInFlight: config.maxInFlight,
    maxAttempts: config.maxAttempts,
    retryBackoffMs: config.retryBackoffMs,
    defaultTimeoutMs: config.defaultTimeoutMs,
    stageTimeoutMs: config.stageTimeoutMs,
    retentionMs: config.retentionMs,
    maxRetained: config.maxRetained,
    strandedTimeoutMs: config.strandedTimeoutMs,
    leaseMs: config.leaseMs,
    preemption: config.preemption === 'on',
    preemptMinRunMs: config.preemptMinRunMs,
    deadlinePolicy: config.deadlinePolicy,
  };
}

/**
 * The tasks waiting here, for discovery's load: discovery asks for it synchronously, and the
 * queue depth (a round trip on a shared store) is refreshed once a second.
 */
function queueDepth(scheduler: Scheduler): { value(): number; stop(): void } {
  let queued = 0;
  const timer = setInterval(() => {
    scheduler.queueSizes().then(
      (sizes) => (queued = Object.values(sizes).reduce((a, b) => a + b, 0)),
      () => undefined,
    );
  }, 1000);
  timer.unref();
  return { value: () => queued, stop: () => clearInterval(timer) };
}

/** Registers the scheduler in discovery as `scheduler`, with its in-flight and queued counts as load. */
function register(
  discovery: Discovery,
  scheduler: Scheduler,
  at: {
    config: SchedulerConfig;
    instanceId: string;
    version: string;
    address: string;
    depth: { value(): number };
    metricsUrl?: string | undefined;
  },
): Promise<Registration> {
  const { config, metricsUrl } = at;
  return discovery.register(
    {
      id: at.instanceId,
      name: 'scheduler',
      version: at.version,
      nodeId: config.nodeId,
      pool: 'scheduler',
      stage: 'scheduler',
      grpcAddress: at.address,
      models: [],
      capacity: config.maxInFlight,
      ...(metricsUrl ? { metadata: { metrics_url: metricsUrl } } : {}),
    },
    () => ({ inFlight: scheduler.inFlightCount(), queued: at.depth.value() }),
  );
}
