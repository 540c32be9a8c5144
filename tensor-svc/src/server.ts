import {
  GrpcServer,
  advertisedAddress,
  hostOf,
  loadTlsFiles,
  startMetricsEndpoint,
  type Logger,
  type MetricsEndpoint,
  type TlsFiles,
} from '@diffmesh/core';
import { openDurableStore } from '@diffmesh/tensor-client';
import {
  resolveTensorSvcConfig,
  type ResolvedTensorSvcConfig,
  type TensorSvcConfig,
  type TensorSvcConfigInput,
  type TensorSvcEnv,
} from './config.js';
import { ObjectCapabilities } from './capabilities.js';
import { DurableBackedStore } from './durable-backed-store.js';
import { TensorMetrics } from './metrics.js';
import type { ObjectStore } from './object-store.js';
import { TensorServiceImpl } from './service.js';
import { TieredStore } from './store.js';
import { WriteThroughStore } from './write-through.js';

/** Non-configuration inputs of {@link startTensorService}. */
export interface StartTensorServiceOptions {
  /** Clock of TTLs, for tests. Default `Date.now`. */
  now?: () => number;
  /** TLS for the gRPC port; absent = plaintext. */
  tls?: TlsFiles;
  /** `REDIS_URL` and the `AWS_*` endpoint and region (see `tensorSvcEnv`). Default none. */
  env?: TensorSvcEnv;
}

/** What a started tensor-svc tells whoever registers it (discovery, supervisors). */
export interface TensorServiceInfo {
  /** `host:port` written into ObjectRefs (the advertise address, or the bound address). */
  address: string;
  /** `host:port` actually bound. */
  listenAddress: string;
  nodeId: string;
  /** Where same-node readers find the objects; `''` with backend redis or s3. */
  shmDir: string;
  /** `host:port` of the /metrics endpoint, when enabled. */
  metricsAddress?: string;
}

/** A running tensor-svc. */
export interface RunningTensorService extends TensorServiceInfo {
  config: ResolvedTensorSvcConfig;
  store: ObjectStore;
  metrics: TensorMetrics;
  /**
   * Graceful stop: health NOT_SERVING, no new calls, calls in flight get `graceMs` (default
   * the config's drainGraceMs) before being cut, then every object and directory is removed.
   * Idempotent.
   */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts tensor-svc: claims its shared-memory and spill directories, serves TensorService
 * (with health and reflection) on `config.listen`, and the /metrics endpoint when
 * `config.metricsListen` is set.
 */
export async function startTensorService(
  config: TensorSvcConfig | TensorSvcConfigInput,
  log: Logger,
  opts: StartTensorServiceOptions = {},
): Promise<RunningTensorService> {
  const c = resolveTensorSvcConfig(config, opts.env);
  const store = await openObjectStore(c, log, opts);
  // Durable stores expire objects themselves (redis) or need listing (S3): a slower sweep.
  const durableSweep =
    c.durableLocation && c.durableSweepIntervalMs > 0
      ? setInterval(() => {
          store.sweep().catch((err: unknown) => log.warn({ err }, 'tensor store: sweep failed'));
        }, c.durableSweepIntervalMs)
      : undefined;
  durableSweep?.unref();
  const metrics = new TensorMetrics();
  const service = new TensorServiceImpl({
    store,
    metrics,
    log,
    chunkBytes: c.chunkBytes,
    maxStreamBufferedBytes: c.maxStreamBufferedBytes,
    capabilities: c.capabilities ? ObjectCapabilities.fromFile(c.capabilityKeyFile) : ObjectCapabilities.off(),
  });
  let server: GrpcServer;
  try {
    // TLS from the options (programs embedding the service) or from the configuration.
    const tls = opts.tls ?? loadTlsFiles(c.tls);
    server = await GrpcServer.start({ address: c.listen, services: [service.binding()], log, ...(tls ? { tls } : {}) });
  } catch (err) {
    clearInterval(durableSweep);
    await store.close();
    throw err;
  }
  // What readers on other nodes dial: written into ObjectRefs (and registered in NATS).
  const address = advertisedAddress({ listen: c.listen, bound: server.address, advertise: c.advertiseAddress }, log);
  service.owner = { address, nodeId: c.nodeId };
  let metricsServer: MetricsEndpoint | undefined;
  if (c.metricsListen) {
    try {
      metricsServer = await startMetricsEndpoint(
        { contentType: 'text/plain; version=0.0.4; charset=utf-8', render: () => metrics.render(store.usage(), { node_id: c.nodeId }) },
        c.metricsListen,
        log,
        hostOf(address),
      );
    } catch (err) {
      server.forceStop();
      clearInterval(durableSweep);
      await store.close();
      throw err;
    }
  }
  log.info(
    {
      address,
      backend: c.backend,
      // The credential-free URI only.
      durableStore: c.durableLocation?.uri,
      writeThrough: c.backend === 'memory' && c.durableLocation ? c.writeThrough : undefined,
      shmDir: store.shmDir,
      spillDir: c.diskCapacityBytes > 0 ? c.spillDir : undefined,
      chunkBytes: c.chunkBytes,
      memoryCapacityBytes: c.memoryCapacityBytes,
      spillThresholdBytes: c.spillThresholdBytes,
      diskCapacityBytes: c.diskCapacityBytes,
      metrics: metricsServer?.address,
    },
    'tensor-svc ready',
  );
  let stopping: Promise<void> | undefined;
  return {
    address,
    listenAddress: server.address,
    nodeId: c.nodeId,
    shmDir: store.shmDir ?? '',
    ...(metricsServer ? { metricsAddress: metricsServer.address } : {}),
    config: c,
    store,
    metrics,
    stop(graceMs = c.drainGraceMs) {
      stopping ??= (async () => {
        // Draining waits for every call to end; open PutObjects streams end once the objects
        // they carry are answered (their clients reopen one elsewhere or retry).
        const drained = server.drain(graceMs);
        await service.endObjectStreams();
        await drained;
        clearInterval(durableSweep);
        await store.close();
        await metricsServer?.close();
        log.info('tensor-svc stopped');
      })();
      return stopping;
    },
  };
}

/**
 * The store behind the service: this node's tiers (with write-through to the durable store
 * when one is configured), or the durable store alone with backend redis or s3.
 */
async function openObjectStore(c: ResolvedTensorSvcConfig, log: Logger, opts: StartTensorServiceOptions): Promise<ObjectStore> {
  const env = opts.env ?? {};
  const endpoint = c.s3Endpoint || env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL;
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION;
  const durable = c.durableLocation
    ? openDurableStore(c.durableLocation, {
        defaultTtlMs: c.defaultTtlMs,
        retryAfterMs: c.retryAfterMs,
        ...(endpoint ? { s3Endpoint: endpoint } : {}),
        ...(region ? { s3Region: region } : {}),
        ...(env.REDIS_URL ? { redisCredentials: [env.REDIS_URL] } : {}),
        logger: log,
      })
    : undefined;
  if (c.backend !== 'memory') {
    return new DurableBackedStore({ durable: durable!, defaultTtlMs: c.defaultTtlMs, log, ...(opts.now ? { now: opts.now } : {}) });
  }
  let local: TieredStore;
  try {
    local = await TieredStore.open({
      shmDir: c.shmDir,
      spillDir: c.spillDir,
      memoryCapacityBytes: c.memoryCapacityBytes,
      spillThresholdBytes: c.spillThresholdBytes,
      diskCapacityBytes: c.diskCapacityBytes,
      defaultTtlMs: c.defaultTtlMs,
      sweepIntervalMs: c.sweepIntervalMs,
      retryAfterMs: c.retryAfterMs,
      recover: c.recover,
      log,
      ...(opts.now ? { now: opts.now } : {}),
    });
  } catch (err) {
    await durable?.close();
    throw err;
  }
  if (!durable) return local;
  return new WriteThroughStore({
    local,
    durable,
    policy: { mode: c.writeThrough, minBytes: c.writeThroughMinBytes, maxBytes: c.writeThroughMaxBytes },
    log,
    chunkBytes: c.chunkBytes,
  });
}
