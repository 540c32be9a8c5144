#!/usr/bin/env node
// encoder-svc: config → stage handler → gRPC StageService → NATS registration → signal handling (flushing telemetry last).
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
import { TextEncodingStage } from './text-encoding-stage.js';

const config = loadServiceConfig(stageServiceConfig('encoder-svc', 'DIFFMESH_ENCODER_'), process.argv.slice(2));
const log = createLogger({ name: 'encoder-svc', ...config.log, mixin: traceLogFields });
const version = packageVersion(import.meta.url);
// Tracing from the standard OTEL_* variables (off without an endpoint).
const telemetry = await startTelemetry({ serviceName: 'encoder-svc', serviceVersion: config.version || version, log });
await runProcess('encoder-svc', log, () =>
  startStageService({
    name: 'encoder-svc',
    version,
    config,
    log,
    createHandler: (deps) => new TextEncodingStage({ ...deps }),
  }),
  { telemetry },
);
