#!/usr/bin/env node
// dit-svc: config → stage handler → gRPC StageService → NATS registration → signal handling (flushing telemetry last).
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
import { DenoisingStage } from './denoising-stage.js';

const config = loadServiceConfig(stageServiceConfig('dit-svc', 'DIFFMESH_DIT_'), process.argv.slice(2));
const log = createLogger({ name: 'dit-svc', ...config.log, mixin: traceLogFields });
const version = packageVersion(import.meta.url);
// Tracing from the standard OTEL_* variables (off without an endpoint).
const telemetry = await startTelemetry({ serviceName: 'dit-svc', serviceVersion: config.version || version, log });
await runProcess('dit-svc', log, () =>
  startStageService({
    name: 'dit-svc',
    version,
    config,
    log,
    createHandler: (deps) => new DenoisingStage({ ...deps, maxBatch: config.maxBatch }),
  }),
  { telemetry },
);
