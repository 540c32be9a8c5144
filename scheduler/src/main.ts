#!/usr/bin/env node
// scheduler: config → plan registry, queues, discovery → gRPC SchedulerService → signal handling (flushing telemetry last).
import { createLogger, loadServiceConfig, packageVersion, runProcess, startTelemetry, traceLogFields } from '@diffmesh/core';
import { schedulerConfig } from './config.js';
import { startSchedulerService } from './server.js';

const config = loadServiceConfig(schedulerConfig, process.argv.slice(2));
const log = createLogger({ name: 'scheduler', ...config.log, mixin: traceLogFields });
const version = config.version || packageVersion(import.meta.url);
// Tracing from the standard OTEL_* variables (off without an endpoint).
const telemetry = await startTelemetry({ serviceName: 'scheduler', serviceVersion: version, log });
await runProcess('scheduler', log, () => startSchedulerService(config, log, version, process.env), { telemetry });
