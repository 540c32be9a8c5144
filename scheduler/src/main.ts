#!/usr/bin/env node
// scheduler: config → plan registry, queues, discovery → gRPC SchedulerService → signal handling.
import { createLogger, loadServiceConfig, packageVersion, runProcess } from '@diffmesh/runtime';
import { schedulerConfig } from './config.js';
import { startSchedulerService } from './server.js';

const config = loadServiceConfig(schedulerConfig, process.argv.slice(2));
const log = createLogger({ name: 'scheduler', ...config.log });
await runProcess('scheduler', log, () => startSchedulerService(config, log, packageVersion(import.meta.url)));
