#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import {
  ConfigError,
  createLogger,
  packageVersion,
  runProcess,
  startTelemetry,
  traceLogFields,
  type LoadConfigOptions,
  type Logger,
} from '@diffmesh/core';
import { createDiscovery, natsDiscoveryConfigOf } from '@diffmesh/discovery';
import { loadTensorSvcConfig, tensorSvcEnv, type TensorSvcConfig } from './config.js';
import { startTensorService, type RunningTensorService, type TensorServiceInfo } from './server.js';

/**
 * Called once the service serves. May return a function that is awaited first when the
 * service stops (e.g. to leave discovery before draining).
 */
export type OnTensorServiceReady = (info: TensorServiceInfo) => void | (() => Promise<void>) | Promise<void | (() => Promise<void>)>;

/** Inputs of {@link runTensorSvc}. */
export interface RunTensorSvcOptions extends Pick<LoadConfigOptions, 'argv' | 'env' | 'file'> {
  /** Registration seam: runs once the service serves, before the listen line is printed. */
  onReady?: OnTensorServiceReady;
}

/**
 * Runs tensor-svc as a process: configuration from `DIFFMESH_TENSOR_*`, flags and an optional
 * file; prints `tensor-svc listening on host:port` (and `tensor-svc metrics on
 * http://host:port/metrics` when enabled) on stdout; SIGTERM/SIGINT drain gracefully and
 * exit 0, a second signal exits at once. Bad configuration exits 2, a failed start 1.
 */
export async function runTensorSvc(opts: RunTensorSvcOptions = {}): Promise<void> {
  let config;
  try {
    config = loadTensorSvcConfig({
      argv: opts.argv ?? [],
      ...(opts.env ? { env: opts.env } : {}),
      ...(opts.file ? { file: opts.file } : {}),
    });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`tensor-svc: invalid configuration\n${err.message}\n`);
    process.exit(2);
  }
  const log = createLogger({
    name: 'tensor-svc',
    ...config.log,
    base: { nodeId: config.nodeId },
    mixin: traceLogFields,
  });
  // Tracing from the standard OTEL_* variables (off without an endpoint); flushed last on exit.
  const version = packageVersion(import.meta.url);
  const telemetry = await startTelemetry({ serviceName: 'tensor-svc', serviceVersion: version, log });
  await runProcess(
    'tensor-svc',
    log,
    async () => {
      const svc = await startTensorService(config, log, { env: tensorSvcEnv() });
      if (svc.metricsAddress) process.stdout.write(`tensor-svc metrics on http://${svc.metricsAddress}/metrics\n`);
      const onReady =
        opts.onReady ?? (config.natsUrl ? (info: TensorServiceInfo) => registerInNats(info, config, svc, version, log) : undefined);
      let leave: (() => Promise<void>) | undefined;
      if (onReady) {
        const { address, listenAddress, nodeId, shmDir, metricsAddress } = svc;
        try {
          const result = await onReady({ address, listenAddress, nodeId, shmDir, ...(metricsAddress ? { metricsAddress } : {}) });
          if (typeof result === 'function') leave = result;
        } catch (err) {
          await svc.stop(0);
          throw err;
        }
      }
      return {
        address: svc.address,
        async stop() {
          await leave?.().catch((err: unknown) => log.warn({ err }, 'onReady cleanup failed'));
          await svc.stop();
        },
      };
    },
    { telemetry },
  );
}

/** Registers the service in NATS as `tensor-svc` (stage `tensor`); returns the unregistration. */
async function registerInNats(
  info: TensorServiceInfo,
  config: TensorSvcConfig,
  svc: RunningTensorService,
  version: string,
  log: Logger,
): Promise<() => Promise<void>> {
  const discovery = await createDiscovery(natsDiscoveryConfigOf(config), log);
  try {
    const registration = await discovery.register(
      {
        ...(config.instanceId ? { id: config.instanceId } : { id: `tensor-svc-${info.nodeId.replace(/[^A-Za-z0-9_-]/g, '_')}` }),
        name: 'tensor-svc',
        version,
        nodeId: info.nodeId,
        pool: '',
        stage: 'tensor',
        grpcAddress: info.address,
        models: [],
        capacity: 0,
        tensorAddress: info.address,
        metadata: {
          ...(info.shmDir ? { shm_dir: info.shmDir } : {}),
          ...(info.metricsAddress ? { metrics_address: info.metricsAddress } : {}),
        },
      },
      () => ({ inFlight: svc.metrics.snapshot().openStreams }),
    );
    log.info({ id: registration.instance.id }, 'registered in NATS');
    return async () => {
      await registration.stop();
      await discovery.close();
    };
  } catch (err) {
    await discovery.close();
    throw err;
  }
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return pathToFileURL(realpathSync(script)).href === import.meta.url;
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  runTensorSvc({ argv: process.argv.slice(2) }).catch((err: unknown) => {
    process.stderr.write(`tensor-svc: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
