import { GrpcServer, loadTlsFiles, startMetricsEndpoint, type Logger, type MetricsEndpoint, type TlsFiles } from '@diffmesh/runtime';
import { resolveTensorSvcConfig, type ResolvedTensorSvcConfig, type TensorSvcConfig, type TensorSvcConfigInput } from './config.js';
import { TensorMetrics } from './metrics.js';
import { TensorServiceImpl } from './service.js';
import { TieredStore } from './store.js';

/** Non-configuration inputs of {@link startTensorService}. */
export interface StartTensorServiceOptions {
  /** Clock of TTLs, for tests. Default `Date.now`. */
  now?: () => number;
  /** TLS for the gRPC port; absent = plaintext. */
  tls?: TlsFiles;
}

/** What a started tensor-svc tells whoever registers it (discovery, supervisors). */
export interface TensorServiceInfo {
  /** `host:port` written into ObjectRefs (the advertise address, or the bound address). */
  address: string;
  /** `host:port` actually bound. */
  listenAddress: string;
  nodeId: string;
  /** Where same-node readers find the objects. */
  shmDir: string;
  /** `host:port` of the /metrics endpoint, when enabled. */
  metricsAddress?: string;
}

/** A running tensor-svc. */
export interface RunningTensorService extends TensorServiceInfo {
  config: ResolvedTensorSvcConfig;
  store: TieredStore;
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
  const c = resolveTensorSvcConfig(config);
  const store = await TieredStore.open({
    shmDir: c.shmDir,
    spillDir: c.spillDir,
    memoryCapacityBytes: c.memoryCapacityBytes,
    spillThresholdBytes: c.spillThresholdBytes,
    diskCapacityBytes: c.diskCapacityBytes,
    defaultTtlMs: c.defaultTtlMs,
    sweepIntervalMs: c.sweepIntervalMs,
    retryAfterMs: c.retryAfterMs,
    log,
    ...(opts.now ? { now: opts.now } : {}),
  });
  const metrics = new TensorMetrics();
  const service = new TensorServiceImpl({
    store,
    metrics,
    log,
    chunkBytes: c.chunkBytes,
    maxStreamBufferedBytes: c.maxStreamBufferedBytes,
  });
  let server: GrpcServer;
  try {
    // TLS from the options (programs embedding the service) or from the configuration.
    const tls = opts.tls ?? loadTlsFiles(c.tls);
    server = await GrpcServer.start({ address: c.listen, services: [service.binding()], log, ...(tls ? { tls } : {}) });
  } catch (err) {
    await store.close();
    throw err;
  }
  const address = c.advertiseAddress || server.address;
  service.owner = { address, nodeId: c.nodeId };
  let metricsServer: MetricsEndpoint | undefined;
  if (c.metricsListen) {
    try {
      metricsServer = await startMetricsEndpoint(
        { contentType: 'text/plain; version=0.0.4; charset=utf-8', render: () => metrics.render(store.usage(), { node_id: c.nodeId }) },
        c.metricsListen,
        log,
      );
    } catch (err) {
      server.forceStop();
      await store.close();
      throw err;
    }
  }
  log.info(
    {
      address,
      shmDir: c.shmDir,
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
    shmDir: c.shmDir,
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
        await store.close();
        await metricsServer?.close();
        log.info('tensor-svc stopped');
      })();
      return stopping;
    },
  };
}
