/**
 * The gateway service: a public HTTP listener (annotated proto routes, OpenAI-compatible
 * endpoints, OpenAPI) behind API keys, rate limits, body and prompt limits and CORS, and an
 * admin listener (health, readiness, Prometheus metrics) that needs no key.
 *
 * `startGateway` wires it in steps: upstreams (discovery, scheduler and tensor pools) → the
 * services behind the routes → the dispatcher → both listeners → registration; `stop` runs
 * them down in the opposite order.
 */
import type { Server } from 'node:http';
import { httpBindings } from '@diffmesh/protos';
import { DurableStores, InlineTensorStore, RemoteTensorStore, RoutedTensorStore, durableSettingsFromEnv } from '@diffmesh/tensor-client';
import { loadTlsFiles, packageVersion, TenantDirectory, type Logger } from '@diffmesh/core';
import { createDiscovery, natsDiscoveryConfigOf, type Discovery, type Registration } from '@diffmesh/discovery';
import { createAdminListener } from './admin-listener.js';
import { Gatekeeper } from './auth.js';
import type { GatewayConfig } from './config.js';
import { Cors } from './cors.js';
import { Dispatcher } from './dispatch.js';
import { fixedRoutes } from './fixed-routes.js';
import { hostPort, listen, urlOf, type BoundAddress } from './listen-address.js';
import { GatewayMetrics } from './metrics.js';
import { ServedModelCache, type OpenAiDeps } from './openai.js';
import { openApiDocument } from './openapi.js';
import { createPublicListener } from './public-listener.js';
import { ResultStore } from './results.js';
import { RouteTable } from './routes.js';
import { loadStatusPage } from './status-page.js';
import { SchedulerClient, UpstreamPool } from '@diffmesh/client';
import { VideoJobs } from './videos.js';

/** A running gateway. */
export interface RunningGateway {
  /** `http://host:port` of the public listener. */
  address: string;
  /** `http://host:port` of the admin listener. */
  adminAddress: string;
  routes: RouteTable;
  schedulers: UpstreamPool;
  tensors: UpstreamPool;
  /** Graceful stop: leave discovery, stop accepting, let open requests finish (up to the grace). Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/** Options of {@link startGateway}. */
export interface StartGatewayOptions {
  /** Discovery to use instead of connecting to `config.natsUrl` (the caller closes it). */
  discovery?: Discovery;
  /** Version advertised in discovery and the OpenAPI document. */
  version?: string;
  /**
   * Where credentials of durable tensor stores come from (`REDIS_URL`, `AWS_*`), for reading
   * results whose owner is gone; default none.
   */
  env?: Record<string, string | undefined>;
}

/** Starts the gateway's two listeners and its upstream pools. */
export async function startGateway(config: GatewayConfig, log: Logger, opts: StartGatewayOptions = {}): Promise<RunningGateway> {
  const version = opts.version ?? packageVersion(import.meta.url);
  const upstreams = await connectUpstreams(config, log, opts.discovery, opts.env ?? {});
  const routes = new RouteTable(httpBindings());
  const services = createServices(config, log, upstreams);
  const tenants = TenantDirectory.fromFile(config.tenantsFile || undefined);
  const unwatchTenants = tenants.watch(log);
  const gatekeeper = new Gatekeeper(config, log, tenants);
  const dispatcher = new Dispatcher({
    fixed: fixedRoutes({
      openApi: openApiDocument(routes.routes, { version, authenticated: gatekeeper.authenticated }),
      statusPage: loadStatusPage(),
      openAi: services.openAi,
      maxBodyBytes: config.maxBodyBytes,
      maxImageBytes: config.maxImageBytes,
    }),
    routes,
    proto: {
      upstreams: upstreams.byService,
      maxBodyBytes: config.maxBodyBytes,
      maxImageBytes: config.maxImageBytes,
      maxPromptChars: config.maxPromptChars,
      schedulerWait: { maxWaitMs: config.schedulerWaitMs },
    },
    cors: new Cors(config.corsOrigins),
    gatekeeper,
    metrics: upstreams.metrics,
    log,
  });
  const listeners = await openListeners(config, {
    public: createPublicListener(dispatcher, log),
    admin: createAdminListener({ version, schedulers: upstreams.schedulers, metrics: upstreams.metrics, log }),
  }).catch(async (err: unknown) => {
    gatekeeper.close();
    unwatchTenants();
    await upstreams.close();
    throw err;
  });
  const registration = await registerGateway(config, log, upstreams.discovery, version, listeners);
  log.info(
    {
      address: listeners.address,
      adminAddress: listeners.adminAddress,
      schedulers: upstreams.schedulers.addresses(),
      auth: gatekeeper.authenticated,
      routes: routes.routes.length,
    },
    'gateway ready',
  );

  let stopping: Promise<void> | undefined;
  return {
    address: listeners.address,
    adminAddress: listeners.adminAddress,
    routes,
    schedulers: upstreams.schedulers,
    tensors: upstreams.tensors,
    stop(graceMs = config.drainGraceMs) {
      stopping ??= (async () => {
        await registration?.stop().catch(() => undefined);
        await listeners.close(dispatcher, graceMs);
        gatekeeper.close();
        unwatchTenants();
        await services.close();
        await upstreams.close();
      })();
      return stopping;
    },
  };
}

/** What the gateway calls: discovery, the scheduler and tensor-service pools, and a tensor store over them. */
interface Upstreams {
  discovery: Discovery | undefined;
  schedulers: UpstreamPool;
  tensors: UpstreamPool;
  /** Upstream pool by fully qualified service name (for the proto routes). */
  byService: ReadonlyMap<string, UpstreamPool>;
  store: InlineTensorStore;
  /** The gateway's metrics; they count the pools' instances and failovers. */
  metrics: GatewayMetrics;
  /** Closes the pools, the store and the discovery the gateway connected itself. */
  close(): Promise<void>;
}

async function connectUpstreams(
  config: GatewayConfig,
  log: Logger,
  given: Discovery | undefined,
  env: Record<string, string | undefined>,
): Promise<Upstreams> {
  const ownDiscovery = !given && config.natsUrl ? await createDiscovery(natsDiscoveryConfigOf(config), log) : undefined;
  const discovery = given ?? ownDiscovery;
  // The first poll: schedulers already running are in the pools before the first request.
  if (discovery) await discovery.instances();
  let metrics: GatewayMetrics | undefined;
  const tls = loadTlsFiles(config.tls);
  const schedulers = new UpstreamPool({
    name: 'scheduler',
    ...(tls ? { tls } : {}),
    addresses: config.schedulerAddresses,
    ...(discovery ? { discovery, stage: 'scheduler' as const } : {}),
    notFoundReasons: ['REQUEST_NOT_FOUND'],
    timeoutMs: config.upstreamTimeoutMs,
    onFailover: () => metrics?.failovers.inc({ pool: 'scheduler' }),
    log,
  });
  const tensors = new UpstreamPool({
    name: 'tensor service',
    ...(tls ? { tls } : {}),
    addresses: config.tensorAddresses,
    ...(discovery ? { discovery, stage: 'tensor' as const } : {}),
    notFoundReasons: ['OBJECT_NOT_FOUND', 'OBJECT_EXPIRED'],
    timeoutMs: config.upstreamTimeoutMs,
    onFailover: () => metrics?.failovers.inc({ pool: 'tensor' }),
    log,
  });
  metrics = new GatewayMetrics(() => ({ scheduler: schedulers.addresses().length, tensor: tensors.addresses().length }));
  // Results are read from the tensor-svc that owns them, or from their durable copy (redis/S3,
  // credentials from REDIS_URL / AWS_*) when the owner is gone.
  const store = new InlineTensorStore(
    new RoutedTensorStore({
      remote: new RemoteTensorStore({ address: '', nodeId: config.nodeId, log, ...(tls ? { tls } : {}) }),
      durable: new DurableStores({ ...durableSettingsFromEnv(env), logger: log }),
      log,
    }),
  );
  return {
    discovery,
    schedulers,
    tensors,
    byService: new Map<string, UpstreamPool>([
      ['diffmesh.scheduler.v1.SchedulerService', schedulers],
      ['diffmesh.tensor.v1.TensorService', tensors],
    ]),
    store,
    metrics,
    async close() {
      schedulers.close();
      tensors.close();
      await store.close();
      await ownDiscovery?.close();
    },
  };
}

/** The services behind the OpenAI-compatible routes. */
interface Services {
  openAi: OpenAiDeps;
  /** Ends video jobs, image results and scheduler sessions. */
  close(): Promise<void>;
}

function createServices(config: GatewayConfig, log: Logger, { schedulers, tensors, store, metrics }: Upstreams): Services {
  const api = new SchedulerClient({ pool: schedulers, waitForRestartMs: config.schedulerWaitMs, log });
  const results = new ResultStore(store, config.resultTtlMs, log, config.maxImageResults);
  const videos = new VideoJobs({ api, store, ttlMs: config.resultTtlMs, maxJobs: config.maxVideoJobs, ffmpegPath: config.ffmpegPath, log });
  return {
    openAi: {
      api,
      store,
      results,
      tensors,
      videos,
      models: new ServedModelCache(api),
      metrics,
      maxBodyBytes: config.maxBodyBytes,
      maxPromptChars: config.maxPromptChars,
      maxImageBytes: config.maxImageBytes,
      publicUrl: config.publicUrl,
      log,
    },
    async close() {
      videos.close();
      results.close();
      // Session streams end once their requests (cancelled with their HTTP requests) have.
      await Promise.race([api.close(), new Promise<void>((r) => setTimeout(r, 1000).unref())]);
    },
  };
}

/** Both listeners, bound. */
interface Listeners {
  /** `http://host:port` of the public listener. */
  address: string;
  /** `http://host:port` of the admin listener. */
  adminAddress: string;
  publicAddr: BoundAddress;
  /** Stops accepting, lets the dispatcher's open requests finish (up to `graceMs`), then closes every connection. */
  close(dispatcher: Dispatcher, graceMs: number): Promise<void>;
}

async function openListeners(config: GatewayConfig, servers: { public: Server; admin: Server }): Promise<Listeners> {
  const { public: server, admin } = servers;
  let publicAddr: BoundAddress;
  let adminAddr: BoundAddress;
  try {
    publicAddr = await listen(server, config.listen);
    adminAddr = await listen(admin, config.adminListen);
  } catch (err) {
    server.close();
    admin.close();
    throw err;
  }
  return {
    address: urlOf(publicAddr),
    adminAddress: urlOf(adminAddr),
    publicAddr,
    async close(dispatcher, graceMs) {
      const closed = Promise.all([new Promise<void>((r) => server.close(() => r())), new Promise<void>((r) => admin.close(() => r()))]);
      server.closeIdleConnections();
      admin.closeAllConnections();
      await dispatcher.drain(graceMs);
      server.closeAllConnections();
      await closed;
    },
  };
}

/** Registers the gateway in discovery (its HTTP and admin URLs); a failure is logged, not fatal. */
async function registerGateway(
  config: GatewayConfig,
  log: Logger,
  discovery: Discovery | undefined,
  version: string,
  listeners: Listeners,
): Promise<Registration | undefined> {
  if (!discovery) return undefined;
  return discovery
    .register({
      name: 'gateway',
      version,
      nodeId: config.nodeId,
      pool: '',
      stage: 'gateway',
      grpcAddress: hostPort(listeners.publicAddr),
      models: [],
      capacity: 0,
      metadata: { http_url: config.publicUrl || listeners.address, admin_url: listeners.adminAddress },
    })
    .catch((err: unknown) => {
      log.warn({ err }, 'could not register in discovery');
      return undefined;
    });
}
