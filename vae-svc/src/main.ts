#!/usr/bin/env node
// vae-svc: config → stage handler → gRPC StageService → NATS registration → signal handling (flushing telemetry last).
import {
  createLogger,
  loadServiceConfig,
  packageVersion,
  runProcess,
  stageServiceConfig,
  startStageService,
  startTelemetry,
  traceLogFields,
} from '@diffmesh/runtime';
import { VaeDecodingStage } from './vae-decoding-stage.js';

const config = loadServiceConfig(stageServiceConfig('vae-svc', 'DIFFMESH_VAE_'), process.argv.slice(2));
const log = createLogger({ name: 'vae-svc', ...config.log, mixin: traceLogFields });
const version = packageVersion(import.meta.url);
// Tracing from the standard OTEL_* variables (off without an endpoint).
const telemetry = await startTelemetry({ serviceName: 'vae-svc', serviceVersion: config.version || version, log });
await runProcess('vae-svc', log, () =>
  startStageService({
    name: 'vae-svc',
    version,
    config,
    log,
    createHandler: (deps) => new VaeDecodingStage({ ...deps }),
  }),
  { telemetry },
);
