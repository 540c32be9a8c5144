#!/usr/bin/env node
// gateway: config → upstream pools (discovery and/or addresses) → HTTP listeners → signal handling.
import { createLogger, loadServiceConfig, packageVersion, runProcess, startTelemetry, traceLogFields } from '@diffmesh/core';
import { gatewayConfig } from './config.js';
import { startGateway, type RunningGateway } from './server.js';

const config = loadServiceConfig(gatewayConfig, process.argv.slice(2));
const log = createLogger({ name: 'gateway', ...config.log, base: { nodeId: config.nodeId }, mixin: traceLogFields });
const version = packageVersion(import.meta.url);
// Tracing from the standard OTEL_* variables (off without an endpoint).
const telemetry = await startTelemetry({ serviceName: 'gateway', serviceVersion: version, log });
let gateway: RunningGateway | undefined;
// Prints `gateway listening on http://host:port` once both listeners are up.
await runProcess('gateway', log, async () => (gateway = await startGateway(config, log, { version, env: process.env })), { telemetry });
if (gateway) process.stdout.write(`gateway admin on ${gateway.adminAddress}\n`);
