import { realpath } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  defineConfig,
  type ConfigDefinition,
  TlsConfigSchema,
  loadTlsFiles,
  tlsConfigMappings,
  logConfigMappings,
  schemaMappings,
  GrpcServer,
  LogConfigSchema,
  createLogger,
  type Logger,
  startTelemetry,
  traceLogFields,
  startMetricsEndpoint,
  type MetricsEndpoint,
  advertisedAddress,
  hostOf,
  Code,
  DiffmeshError,
  type StageHandler,
  type StageName,
  loadServiceConfig,
  packageVersion,
  runProcess,
  redactUri,
  type AdapterReport,
} from '@diffmesh/core';
import {
  createDiscovery,
  natsDiscoveryConfigOf,
  natsTlsConfigFields,
  type Discovery,
  type InstanceLoad,
  type Registration,
} from '@diffmesh/discovery';
import { StageMetrics } from './stage-metrics.js';
import { ModelCatalog } from './model-catalog.js';
import { EXECUTION_PROVIDERS } from './execution-providers.js';
import { SessionCache } from './onnx-sessions.js';
import { KERNEL_CHOICES, WEIGHT_CHOICES } from './graph-passes/graph-rewrites.js';
import { looksLikePath } from '@diffmesh/model-layout';
import {
  DurableStores,
  InlineTensorStore,
  RemoteTensorStore,
  RoutedTensorStore,
  createTensorStore,
  durableSettingsFromEnv,
  openDurableStore,
  parseDurableLocation,
  type DurableSettings,
  type TensorStore,
} from '@diffmesh/tensor-client';
import type { OnnxStageDeps } from './onnx-stage.js';
import { StageService } from './stage-service.js';

/** Configuration every stage service (encoder-svc, dit-svc, vae-svc) shares. */
export const StageServiceConfigSchema = z.object({
  listen: z.string().default('127.0.0.1:0').describe('gRPC listen address host:port (port 0 = any free port)'),
  advertiseAddress: z
    .string()
    .default('')
    .describe(
      'host:port peers on other nodes dial, registered in discovery; a host alone or port 0 takes the bound port (empty = the bound listen address, 127.0.0.1 for a wildcard: set it when listening on 0.0.0.0)',
    ),
  nodeId: z.string().default(hostname()).describe('node this instance runs on (same-node tensor reads use it)'),
  instanceId: z.string().default('').describe('instance id in discovery (default: <service>-<random>)'),
  pool: z.string().min(1).describe('worker pool this instance serves, e.g. dit-tiny'),
  models: z
    .array(z.string())
    .default([])
    .describe(
      'models served and warmed at start (empty = any installed): registry names, model directories (paths), or id=DIR to serve a directory under an id',
    ),
  stage: z
    .string()
    .default('')
    .describe(
      'the stage this process serves, for services that serve several (encoder-svc: text_encoding_2; vae-svc: image_encoding); empty = the default',
    ),
  capacity: z.number().int().positive().default(1).describe('tasks run at once'),
  maxBatch: z.number().int().positive().default(8).describe('denoiser only: most latents in one model run'),
  checkpointEvery: z
    .number()
    .int()
    .nonnegative()
    .default(10)
    .describe('denoiser only: store a checkpoint every K steps, so a retried task resumes on another instance (0 = off)'),
  loraDir: z
    .string()
    .default('')
    .describe(
      'denoiser and text encoders: folder of LoRA adapters (<name>.safetensors) that requests name in params.adapters, each stage applying its part of a file; empty = no adapters',
    ),
  loraCacheBytes: z
    .number()
    .int()
    .positive()
    .default(1024 * 1024 * 1024)
    .describe('denoiser and text encoders: bytes the loaded adapters may hold together (least recently used dropped first)'),
  loraMaxFileBytes: z
    .number()
    .int()
    .positive()
    .default(256 * 1024 * 1024)
    .describe('denoiser and text encoders: largest adapter file read (larger ones are refused)'),
  modelsDirs: z.array(z.string()).min(1).describe('folders holding <org>/<name>/model.json'),
  threads: z.number().int().nonnegative().default(0).describe('onnxruntime intra-op threads (0 = default)'),
  interOpThreads: z.number().int().nonnegative().default(1).describe('onnxruntime inter-op threads (0 = default)'),
  executionProviders: z
    .array(z.enum(EXECUTION_PROVIDERS))
    .min(1)
    .default(['cpu'])
    .describe(
      'onnxruntime execution providers in order of preference, tried in turn for each model: cpu, cuda, tensorrt, coreml, dml, webgpu (e.g. cuda,cpu falls back to the CPU where CUDA does not load)',
    ),
  providerOptions: z
    .partialRecord(z.enum(EXECUTION_PROVIDERS), z.record(z.string(), z.unknown()))
    .default({})
    .describe(
      'options of each execution provider, given to onnxruntime as they are, e.g. {"webgpu":{"validationMode":"disabled"},"cuda":{"deviceId":1}}',
    ),
  graphOptimizationLevel: z
    .enum(['disabled', 'basic', 'extended', 'layout', 'all'])
    .default('all')
    .describe('onnxruntime graph optimization level of every session'),
  kernels: z
    .enum(KERNEL_CHOICES)
    .default('plain')
    .describe(
      "denoiser graphs: fused = attention, layer norms and GELU rewritten at load into the com.microsoft kernels the provider has (MultiHeadAttention, SkipLayerNormalization, Gelu; cpu, cuda, webgpu) where the graph's pattern matches; plain = as the file has them",
    ),
  weights: z
    .enum(WEIGHT_CHOICES)
    .default('as-is')
    .describe(
      "denoiser graphs: int4 = large MatMul weights rewritten at load as 4-bit com.microsoft.MatMulNBits (block 32, symmetric; about 1/7 of float32's memory, at a quality cost); as-is = the file's weights",
    ),
  runnerThreads: z
    .number()
    .int()
    .nonnegative()
    .default(1)
    .describe(
      'threads that run models, per model file on the CPU and per process on a GPU; runs on different threads overlap (0 = on the main thread, which then answers nothing while a model runs: for measurements only)',
    ),
  warmup: z
    .enum(['auto', 'on', 'off'])
    .default('auto')
    .describe(
      'run each served model once at start at its default size, so the first request does not pay for shader compilation (auto = on GPU providers only)',
    ),
  natsUrl: z.string().default('').describe('NATS server for registration (empty = not registered)'),
  natsCredentials: z
    .string()
    .default('')
    .describe(
      "file with this process's NATS credentials: an nkey user seed (SU…), a .creds file or user:password (the file, never the secret, so it stays out of argv)",
    ),
  ...natsTlsConfigFields,
  tensorAddress: z.string().default('').describe("this node's tensor-svc host:port (empty = in-process store)"),
  tensorStore: z
    .string()
    .default('')
    .refine((v) => v === '' || isDurableUri(v), { message: 'must be a redis://host:6379/0[/prefix] or s3://bucket[/prefix] URI' })
    .describe(
      'without a tensor-svc (--tensor empty): put outputs straight into this redis or S3 store, redis://host:6379/0[/prefix] or s3://bucket[/prefix] (empty = in-process store)',
    ),
  s3Endpoint: z
    .string()
    .default('')
    .describe('endpoint of an S3-compatible server for s3:// stores and refs (empty = AWS_ENDPOINT_URL_S3, else AWS)'),
  drainGraceMs: z.number().int().nonnegative().default(30_000).describe('time to finish tasks after SIGTERM'),
  version: z.string().default('').describe('version advertised in discovery (default: the package version)'),
  metricsListen: z.string().default('').describe('host:port of the Prometheus /metrics endpoint (empty = off; port 0 = any free port)'),
  progressIntervalMs: z
    .number()
    .int()
    .nonnegative()
    .default(50)
    .describe('least time between two progress messages of a task; the last step is always sent (0 = every step)'),
  inlineMaxBytes: z
    .number()
    .int()
    .nonnegative()
    .default(64 * 1024)
    .describe('outputs up to this size travel inside the task messages instead of through tensor-svc (0 = never)'),
  tls: TlsConfigSchema.prefault({}).describe('TLS of this service and of its calls to tensor-svc'),
  log: LogConfigSchema.prefault({}),
});
export type StageServiceConfig = z.output<typeof StageServiceConfigSchema>;

/**
 * How the stage schema's fields are reached: every top-level field by its derived names
 * (`maxBatch` → `--max-batch`, `<PREFIX>MAX_BATCH`) except these; `tls` and `log` by their
 * sections' own mappings. A new field needs nothing here.
 */
const STAGE_FIELD_NAMES = { natsUrl: { flag: 'nats' }, tensorAddress: { flag: 'tensor' } } as const;

/** The config definition of a stage service with env prefix `DIFFMESH_<SERVICE>_`. */
export function stageServiceConfig(service: string, envPrefix: string): ConfigDefinition<typeof StageServiceConfigSchema> {
  const fields = schemaMappings(StageServiceConfigSchema, STAGE_FIELD_NAMES);
  return defineConfig({
    name: service,
    schema: StageServiceConfigSchema,
    envPrefix,
    env: { ...fields.env, ...logConfigMappings().env, ...tlsConfigMappings().env },
    flags: { ...fields.flags, ...logConfigMappings().flags, ...tlsConfigMappings().flags },
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
  /** `REDIS_URL` and `AWS_*`: how to reach durable stores (the AWS SDK reads its credentials itself). Default none. */
  env?: Record<string, string | undefined>;
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

/** The load discovery reports: tasks running, and for a stage with adapters how many it holds and can load. */
function instanceLoad(inFlight: number, adapters: AdapterReport | undefined): InstanceLoad {
  return adapters ? { inFlight, adaptersHeld: adapters.held.length, adaptersAvailable: adapters.available.length } : { inFlight };
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
  const store: TensorStore = new InlineTensorStore(tensorStoreOf(config, log, tls, opts.env ?? {}), config.inlineMaxBytes);
  const served = await servedModels(config.models);
  const sessions = new SessionCache({
    intraOpThreads: config.threads,
    interOpThreads: config.interOpThreads,
    executionProviders: config.executionProviders,
    providerOptions: config.providerOptions,
    sessionOptions: { graphOptimizationLevel: config.graphOptimizationLevel },
    runnerThreads: config.runnerThreads,
    graphRewrites: { kernels: config.kernels, weights: config.weights },
    log,
  });
  const catalog = new ModelCatalog(config.modelsDirs, { directories: served.directories });
  // The handler's stage is known only once it exists; its model runs report through this proxy.
  let metrics: StageMetrics | undefined;
  const handler = opts.createHandler({
    catalog,
    sessions,
    store,
    models: served.ids,
    log,
    metrics: {
      modelRun: (seconds) => metrics?.modelRun(seconds),
      denoiseBatch: (size) => metrics?.denoiseBatch(size),
      stepCacheSkipped: (calls) => metrics?.stepCacheSkipped(calls),
      adapterLookup: (outcome) => metrics?.adapterLookup(outcome),
      adapterCounts: (held, available) => metrics?.adapterCounts(held, available),
    },
  });
  metrics = new StageMetrics({ stage: handler.stage, pool: config.pool, processMetrics: metricsListen !== '' });
  try {
    // A provider that cannot work here fails the start, naming what is missing.
    const provider = await sessions.checkStart();
    const warmRuns = config.warmup === 'on' || (config.warmup === 'auto' && provider !== 'cpu');
    for (const model of served.ids) await handler.warm?.(model, { run: warmRuns });
  } catch (err) {
    await sessions.close();
    await store.close();
    throw err;
  }
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
  // What peers on other nodes dial (registered in discovery).
  const address = advertisedAddress(
    { listen: config.listen, bound: server.address, advertise: config.advertiseAddress },
    config.natsUrl ? log : undefined,
  );
  let endpoint: MetricsEndpoint | undefined;
  if (metricsListen) {
    try {
      endpoint = await startMetricsEndpoint(metrics.registry, metricsListen, log, hostOf(address));
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
    discovery = await createDiscovery(natsDiscoveryConfigOf(config), log);
    registration = await discovery.register(
      {
        id: instanceId,
        name: opts.name,
        version,
        nodeId: config.nodeId,
        pool: config.pool,
        stage: handler.stage,
        grpcAddress: address,
        models: served.ids,
        capacity: config.capacity,
        ...(config.tensorAddress ? { tensorAddress: config.tensorAddress } : {}),
        ...(endpoint ? { metadata: { metrics_url: endpoint.url } } : {}),
      },
      () => instanceLoad(service.load.inFlight, handler.adapters?.()),
    );
  }
  log.info({ address, instanceId, pool: config.pool, stage: handler.stage }, `${opts.name} ready`);
  let stopping: Promise<void> | undefined;
  return {
    address,
    instanceId,
    service,
    metrics,
    ...(endpoint ? { metricsUrl: endpoint.url } : {}),
    stop(graceMs = config.drainGraceMs) {
      stopping ??= (async () => {
        // The grace counts from the signal, as an orchestrator's termination grace does: leaving
        // discovery (a round trip to NATS, slow on a loaded node) is spent from it, not added to it.
        const deadline = Date.now() + graceMs;
        const graceOver = new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref());
        server.setServing(false);
        const drained = service.drain();
        const left = registration?.stop().catch((err: unknown) => log.warn({ err }, 'could not leave discovery'));
        await Promise.race([drained, graceOver]);
        // The grace is over: what still runs goes back to its queue now (another instance
        // takes it, a denoiser from its last checkpoint) rather than being cut off later.
        const handedBack = service.handBack();
        if (handedBack > 0) {
          log.info({ tasks: handedBack, graceMs }, 'drain grace over; running tasks handed back');
          await Promise.race([drained, new Promise<void>((resolve) => setTimeout(resolve, 1000).unref())]);
        }
        await left;
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

/**
 * The model ids a stage process serves, from `--models`: registry names as given, a directory
 * path as its absolute real path (the id the scheduler uses for it), `id=DIR` as `id` naming
 * that directory.
 */
export async function servedModels(models: readonly string[]): Promise<{ ids: string[]; directories: Record<string, string> }> {
  const ids: string[] = [];
  const directories: Record<string, string> = {};
  for (const m of models) {
    const eq = m.indexOf('=');
    if (eq > 0 && !looksLikePath(m)) {
      const id = m.slice(0, eq);
      directories[id] = path.resolve(m.slice(eq + 1));
      ids.push(id);
    } else if (looksLikePath(m)) {
      ids.push(await realpath(path.resolve(m)).catch(() => path.resolve(m)));
    } else ids.push(m);
  }
  return { ids, directories };
}

/**
 * The stage a service process serves, from `--stage`: one of `allowed` (empty = the first).
 * Throws INVALID_ARGUMENT naming `stage` and the stages the service has.
 */
export function servedStage<S extends StageName>(given: string, allowed: readonly S[]): S {
  if (given === '') return allowed[0];
  if ((allowed as readonly string[]).includes(given)) return given as S;
  throw new DiffmeshError(
    Code.INVALID_ARGUMENT,
    'INVALID_PARAMETER',
    `stage: this service serves ${allowed.join(' or ')}, not "${given}"`,
    {
      metadata: { field: 'stage' },
    },
  );
}

function isDurableUri(v: string): boolean {
  try {
    parseDurableLocation(v);
    return true;
  } catch {
    return false;
  }
}

/**
 * The stage's tensor store: this node's tensor-svc, or a redis/S3 store with no tensor-svc,
 * either way reading each input where its ref says it lives (shared memory, its owner, its
 * durable copy); the in-process memory store when neither is configured.
 */
function tensorStoreOf(
  config: StageServiceConfig,
  log: Logger,
  tls: ReturnType<typeof loadTlsFiles>,
  env: Record<string, string | undefined>,
): TensorStore {
  if (!config.tensorAddress && !config.tensorStore) return createTensorStore({ backend: 'memory' }, { nodeId: config.nodeId });
  const settings: DurableSettings = {
    ...durableSettingsFromEnv(env),
    ...(config.s3Endpoint ? { s3Endpoint: config.s3Endpoint } : {}),
    ...(config.tensorStore ? { redisCredentials: [config.tensorStore, ...(env.REDIS_URL ? [env.REDIS_URL] : [])] } : {}),
    logger: log,
  };
  const direct = !config.tensorAddress && config.tensorStore ? openDurableStore(config.tensorStore, settings) : undefined;
  if (direct) log.info({ store: redactUri(direct.uri) }, 'tensor outputs go straight to a durable store (no tensor-svc)');
  return new RoutedTensorStore({
    remote: new RemoteTensorStore({ address: config.tensorAddress, nodeId: config.nodeId, log, ...(tls ? { tls } : {}) }),
    ...(direct ? { direct } : {}),
    durable: new DurableStores(settings),
    log,
  });
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
    () =>
      startStageService({
        name: main.name,
        version,
        config,
        log,
        env: process.env,
        createHandler: (deps) => main.createHandler(deps, config),
      }),
    { telemetry },
  );
}
