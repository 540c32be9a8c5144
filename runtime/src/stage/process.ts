import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ConfigError, defineConfig, loadConfig, type ConfigDefinition } from '../config/index.js';
import { createDiscovery } from '../discovery/index.js';
import type { Discovery, Registration } from '../discovery/index.js';
import { TlsConfigSchema, loadTlsFiles, tlsConfigMappings } from '../grpc/options.js';
import { GrpcServer } from '../grpc/server.js';
import { LogConfigSchema, createLogger, type Logger } from '../logging/index.js';
import { startTelemetry, traceLogFields } from '../telemetry/index.js';
import { StageMetrics, startMetricsEndpoint, type MetricsEndpoint } from '../metrics/index.js';
import { ModelCatalog } from '../models/catalog.js';
import { SessionCache } from '../onnx/sessions.js';
import { InlineTensorStore, createTensorStore } from '../tensor-store/index.js';
import type { TensorStore } from '../tensor-store/index.js';
import { RemoteTensorStore } from '../tensor-client/index.js';
import type { OnnxStageDeps } from './onnx-stage.js';
import { StageService } from './service.js';
import type { StageHandler } from './types.js';

/** Configuration every stage service (encoder-svc, dit-svc, vae-svc) shares. */
export const StageServiceConfigSchema = z.object({
  listen: z.string().default('127.0.0.1:0').describe('gRPC listen address host:port (port 0 = any free port)'),
  nodeId: z.string().default(hostname()).describe('node this instance runs on (same-node tensor reads use it)'),
  instanceId: z.string().default('').describe('instance id in discovery (default: <service>-<random>)'),
  pool: z.string().min(1).describe('worker pool this instance serves, e.g. dit-tiny'),
  models: z.array(z.string()).default([]).describe('models served and warmed at start (empty = any installed)'),
  capacity: z.number().int().positive().default(1).describe('tasks run at once'),
  maxBatch: z.number().int().positive().default(8).describe('denoiser only: most latents in one model run'),
  modelsDirs: z.array(z.string()).min(1).describe('folders holding <org>/<name>/model.json'),
  threads: z.number().int().nonnegative().default(0).describe('onnxruntime intra-op threads (0 = default)'),
  natsUrl: z.string().default('').describe('NATS server for registration (empty = not registered)'),
  tensorAddress: z.string().default('').describe("this node's tensor-svc host:port (empty = in-process store)"),
  drainGraceMs: z.number().int().nonnegative().default(30_000).describe('time to finish tasks after SIGTERM'),
  version: z.string().default('').describe('version advertised in discovery (default: the package version)'),
  metricsListen: z.string().default('').describe('host:port of the Prometheus /metrics endpoint (empty = off; port 0 = any free port)'),
  progressIntervalMs: z.number().int().nonnegative().default(50).describe('least time between two progress messages of a task; the last step is always sent (0 = every step)'),
  inlineMaxBytes: z.number().int().nonnegative().default(64 * 1024).describe('outputs up to this size travel inside the task messages instead of through tensor-svc (0 = never)'),
  tls: TlsConfigSchema.prefault({}).describe('TLS of this service and of its calls to tensor-svc'),
  log: LogConfigSchema.default({ level: 'info', pretty: false }),
});
export type StageServiceConfig = z.output<typeof StageServiceConfigSchema>;

/** The config definition of a stage service with env prefix `DIFFMESH_<SERVICE>_`. */
export function stageServiceConfig(service: string, envPrefix: string): ConfigDefinition<typeof StageServiceConfigSchema> {
  return defineConfig({
    name: service,
    schema: StageServiceConfigSchema,
    envPrefix,
    env: {
      LISTEN: 'listen',
      NODE_ID: 'nodeId',
      INSTANCE_ID: 'instanceId',
      POOL: 'pool',
      MODELS: 'models',
      CAPACITY: 'capacity',
      MAX_BATCH: 'maxBatch',
      MODELS_DIRS: 'modelsDirs',
      THREADS: 'threads',
      NATS_URL: 'natsUrl',
      TENSOR_ADDRESS: 'tensorAddress',
      DRAIN_GRACE_MS: 'drainGraceMs',
      VERSION: 'version',
      INLINE_MAX_BYTES: 'inlineMaxBytes',
      PROGRESS_INTERVAL_MS: 'progressIntervalMs',
      METRICS_LISTEN: 'metricsListen',
      LOG_LEVEL: 'log.level',
      ...tlsConfigMappings().env,
    },
    flags: {
      listen: 'listen',
      'node-id': 'nodeId',
      'instance-id': 'instanceId',
      pool: 'pool',
      models: 'models',
      capacity: 'capacity',
      'max-batch': 'maxBatch',
      'models-dirs': 'modelsDirs',
      threads: 'threads',
      nats: 'natsUrl',
      tensor: 'tensorAddress',
      'drain-grace-ms': 'drainGraceMs',
      version: 'version',
      'inline-max-bytes': 'inlineMaxBytes',
      'progress-interval-ms': 'progressIntervalMs',
      'metrics-listen': 'metricsListen',
      'log-level': 'log.level',
      ...tlsConfigMappings().flags,
    },
  });
}

export interface StartStageServiceOptions {
  /** Service name in discovery, e.g. `dit-svc`. */
  name: string;
  /** Semver of the service (its package version). */
  version: string;
  config: StageServiceConfig;
  log: Logger;
  createHandler(deps: OnnxStageDeps): StageHandler;
  /**
   * `host:port` of a Prometheus `/metrics` endpoint (port 0 = any free port; empty or absent
   * = off). Defaults to the config's `metricsListen`.
   */
  metricsListen?: string;
}

/** A running stage service. */
export interface RunningStageService {
  address: string;
  instanceId: string;
  service: StageService;
  /** The instance's metrics (also served on {@link metricsUrl} when enabled). */
  metrics: StageMetrics;
  /** `http://host:port/metrics` when the endpoint is on. */
  metricsUrl?: string;
  /** Graceful stop: leave discovery, NOT_SERVING, finish tasks (up to the grace), close. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts a stage service: loads and warms its models, serves StageService with health and
 * reflection, serves Prometheus metrics when `metricsListen` is set, and registers in NATS
 * (when configured) with its gRPC address, node, pool, stage, models, capacity and
 * `metrics_url`.
 */
export async function startStageService(opts: StartStageServiceOptions): Promise<RunningStageService> {
  const { config, log } = opts;
  // Read from the config once its schema has the field (see StartStageServiceOptions.metricsListen).
  const metricsListen = opts.metricsListen ?? config.metricsListen;
  const instanceId = config.instanceId || `${opts.name}-${randomUUID().slice(0, 8)}`;
  const version = config.version || opts.version;
  const tls = loadTlsFiles(config.tls);
  const store: TensorStore = new InlineTensorStore(
    config.tensorAddress
      ? new RemoteTensorStore({ address: config.tensorAddress, nodeId: config.nodeId, log, ...(tls ? { tls } : {}) })
      : createTensorStore({ backend: 'memory' }, { nodeId: config.nodeId }),
    config.inlineMaxBytes,
  );
  const sessions = new SessionCache({ intraOpThreads: config.threads, interOpThreads: 1 });
  const catalog = new ModelCatalog(config.modelsDirs);
  // The handler's stage is known only once it exists; its model runs report through this proxy.
  let metrics: StageMetrics | undefined;
  const handler = opts.createHandler({
    catalog,
    sessions,
    store,
    models: config.models,
    metrics: {
      modelRun: (seconds) => metrics?.modelRun(seconds),
      denoiseBatch: (size) => metrics?.denoiseBatch(size),
    },
  });
  metrics = new StageMetrics({ stage: handler.stage, pool: config.pool, processMetrics: metricsListen !== '' });
  for (const model of config.models) await handler.warm?.(model);
  const service = new StageService(
    handler,
    {
      instanceId,
      nodeId: config.nodeId,
      pool: config.pool,
      version,
      capacity: config.capacity,
      progressIntervalMs: config.progressIntervalMs,
      ...(config.tensorAddress ? { tensorAddress: config.tensorAddress } : {}),
    },
    log,
    { metrics },
  );
  const server = await GrpcServer.start({ address: config.listen, services: [service.binding()], log, ...(tls ? { tls } : {}) });
  let endpoint: MetricsEndpoint | undefined;
  if (metricsListen) {
    try {
      endpoint = await startMetricsEndpoint(metrics.registry, metricsListen, log);
    } catch (err) {
      server.forceStop();
      await sessions.close();
      await store.close();
      throw err;
    }
    log.info({ url: endpoint.url }, 'metrics endpoint listening');
  }
  let discovery: Discovery | undefined;
  let registration: Registration | undefined;
  if (config.natsUrl) {
    discovery = await createDiscovery({ backend: 'nats', url: config.natsUrl }, log);
    registration = await discovery.register(
      {
        id: instanceId,
        name: opts.name,
        version,
        nodeId: config.nodeId,
        pool: config.pool,
        stage: handler.stage,
        grpcAddress: server.address,
        models: config.models,
        capacity: config.capacity,
        ...(config.tensorAddress ? { tensorAddress: config.tensorAddress } : {}),
        ...(endpoint ? { metadata: { metrics_url: endpoint.url } } : {}),
      },
      () => ({ inFlight: service.load.inFlight }),
    );
  }
  log.info({ address: server.address, instanceId, pool: config.pool, stage: handler.stage }, `${opts.name} ready`);
  let stopping: Promise<void> | undefined;
  return {
    address: server.address,
    instanceId,
    service,
    metrics,
    ...(endpoint ? { metricsUrl: endpoint.url } : {}),
    stop(graceMs = config.drainGraceMs) {
      stopping ??= (async () => {
        const deadline = Date.now() + graceMs;
        server.setServing(false);
        await registration?.stop().catch((err: unknown) => log.warn({ err }, 'could not leave discovery'));
        const drained = service.drain();
        const timer = new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref());
        await Promise.race([drained, timer]);
        // Results may still be on their way: the scheduler closes its dispatch stream once it
        // has them (it retires an instance that left discovery), which lets the server stop.
        await server.drain(Math.max(1000, deadline - Date.now()));
        await discovery?.close();
        await sessions.close();
        await store.close();
        await endpoint?.close();
      })();
      return stopping;
    },
  };
}

/** Options of {@link runProcess}. */
export interface RunProcessOptions {
  /** Flushed and shut down after the service stops (and before a failed start exits). */
  telemetry?: { shutdown(): Promise<void> };
}

/**
 * Runs `start` as a process: SIGTERM/SIGINT drain gracefully, then flush telemetry and exit
 * (a second signal forces an exit). Prints the listen line on stdout for supervisors such
 * as `diffmesh up`.
 */
export async function runProcess(
  name: string,
  log: Logger,
  start: () => Promise<{ address: string; stop(graceMs?: number): Promise<void> }>,
  opts: RunProcessOptions = {},
): Promise<void> {
  // Telemetry's shutdown never rejects; the catch is for foreign implementations.
  const flush = (): Promise<void> => opts.telemetry?.shutdown().catch(() => undefined) ?? Promise.resolve();
  let running: { address: string; stop(graceMs?: number): Promise<void> };
  try {
    running = await start();
  } catch (err) {
    log.fatal({ err }, `${name} failed to start`);
    process.stderr.write(`${name}: ${err instanceof Error ? err.message : String(err)}\n`);
    await flush();
    process.exit(1);
  }
  process.stdout.write(`${name} listening on ${running.address}\n`);
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      log.warn({ sig }, 'second signal; exiting now');
      process.exit(1);
    }
    log.info({ sig }, 'draining');
    running.stop().then(
      async () => {
        await flush();
        process.exit(0);
      },
      async (err: unknown) => {
        log.error({ err }, 'stop failed');
        await flush();
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** The `version` of the package.json one folder above a compiled module (`dist/` → package root). */
export function packageVersion(moduleUrl: string): string {
  const raw = readFileSync(new URL('../package.json', moduleUrl), 'utf8');
  return (JSON.parse(raw) as { version: string }).version;
}

/** Loads a service's config from file/env/flags; on a bad config prints every problem and exits 2. */
export function loadServiceConfig<S extends z.ZodObject>(def: ConfigDefinition<S>, argv: readonly string[]): z.output<S> {
  try {
    return loadConfig(def, { argv });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${def.name}: invalid configuration\n${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

/** What differs between the stage services' entry points. */
export interface StageServiceMain {
  /** Service name, e.g. `dit-svc`. */
  name: string;
  /** Prefix of its environment variables, e.g. `DIFFMESH_DIT_`. */
  envPrefix: string;
  /** `import.meta.url` of the entry point (its package.json gives the version). */
  moduleUrl: string;
  createHandler(deps: OnnxStageDeps, config: StageServiceConfig): StageHandler;
}

/**
 * The whole `main` of a stage service: config from file/env/flags → logger with trace ids →
 * telemetry from the OTEL_* variables → the service → signal handling (flushing telemetry
 * last).
 */
export async function runStageServiceMain(main: StageServiceMain): Promise<void> {
  const config = loadServiceConfig(stageServiceConfig(main.name, main.envPrefix), process.argv.slice(2));
  const log = createLogger({ name: main.name, ...config.log, mixin: traceLogFields });
  const version = packageVersion(main.moduleUrl);
  const telemetry = await startTelemetry({ serviceName: main.name, serviceVersion: config.version || version, log });
  await runProcess(
    main.name,
    log,
    () => startStageService({ name: main.name, version, config, log, createHandler: (deps) => main.createHandler(deps, config) }),
    { telemetry },
  );
}
