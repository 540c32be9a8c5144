import { randomUUID } from 'node:crypto';
import {
  GrpcServer,
  InlineTensorStore,
  RemoteTensorStore,
  createDiscovery,
  createTaskQueue,
  loadTlsFiles,
  loadPlanRegistry,
  startMetricsEndpoint,
  type Discovery,
  type Logger,
  type Registration,
} from '@diffmesh/runtime';
import type { SchedulerConfig } from './config.js';
import { followDiscovery } from './membership.js';
import { SchedulerMetrics } from './metrics.js';
import { Scheduler } from './scheduler.js';
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
export async function startSchedulerService(config: SchedulerConfig, log: Logger, version: string): Promise<RunningScheduler> {
  const instanceId = config.instanceId || `scheduler-${randomUUID().slice(0, 8)}`;
  const registry = await loadPlanRegistry(config.plansFile || undefined);
  // Inline refs (small objects passed by value) need no delete; the rest go to their owners.
  const tls = loadTlsFiles(config.tls);
  const store = new InlineTensorStore(
    new RemoteTensorStore({ address: config.tensorAddress, nodeId: config.nodeId, log, ...(tls ? { tls } : {}) }),
  );
  let metrics: SchedulerMetrics | undefined;
  const scheduler = new Scheduler({
    registry,
    store,
    log,
    limits: {
      maxQueueLength: config.maxQueueLength,
      maxInFlight: config.maxInFlight,
      maxAttempts: config.maxAttempts,
      retryBackoffMs: config.retryBackoffMs,
      defaultTimeoutMs: config.defaultTimeoutMs,
      stageTimeoutMs: config.stageTimeoutMs,
      retentionMs: config.retentionMs,
      maxRetained: config.maxRetained,
      strandedTimeoutMs: config.strandedTimeoutMs,
    },
    createQueue: (name, maxLength) => createTaskQueue({ backend: 'memory', maxLength }, { name }),
    onEvent: (e, state) => metrics?.observe(e, state),
  });
  metrics = new SchedulerMetrics(scheduler);
  const endpoint = config.metricsListen ? await startMetricsEndpoint(metrics.registry, config.metricsListen, log) : undefined;
  if (endpoint) log.info({ url: endpoint.url }, 'metrics endpoint listening');
  const discovery: Discovery = await createDiscovery(
    config.natsUrl ? { backend: 'nats', url: config.natsUrl } : { backend: 'memory' },
    log,
  );
  const unfollow = followDiscovery(scheduler, discovery, { log, ...(tls ? { tls } : {}) });
  const binding = schedulerServiceBinding(scheduler, registry, { instanceId, version }, { eventIntervalMs: config.eventIntervalMs });
  metrics.countSessions(() => binding.openSessions());
  const server = await GrpcServer.start({
    address: config.listen,
    services: [binding],
    log,
    ...(tls ? { tls } : {}),
  });
  let registration: Registration | undefined;
  if (config.natsUrl) {
    registration = await discovery.register(
      {
        id: instanceId,
        name: 'scheduler',
        version,
        nodeId: config.nodeId,
        pool: 'scheduler',
        stage: 'scheduler',
        grpcAddress: server.address,
        models: [],
        capacity: config.maxInFlight,
        ...(endpoint ? { metadata: { metrics_url: endpoint.url } } : {}),
      },
      () => ({ inFlight: scheduler.inFlightCount(), queued: Object.values(scheduler.queueSizes()).reduce((a, b) => a + b, 0) }),
    );
  }
  let stopping: Promise<void> | undefined;
  return {
    address: server.address,
    instanceId,
    scheduler,
    ...(endpoint ? { metricsUrl: endpoint.url } : {}),
    stop(graceMs = config.drainGraceMs) {
      stopping ??= (async () => {
        server.setServing(false);
        // Open sessions end as their requests do, so the server's drain does not wait on idle ones.
        binding.endSessions();
        await registration?.stop().catch(() => undefined);
        await scheduler.drain(graceMs);
        await server.drain(Math.min(graceMs, 1000));
        unfollow();
        await discovery.close();
        await store.close();
        await endpoint?.close();
      })();
      return stopping;
    },
  };
}
