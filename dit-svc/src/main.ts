#!/usr/bin/env node
// dit-svc: config → stage handler → gRPC StageService → NATS registration → signal handling.
import { createLogger, loadServiceConfig, packageVersion, runProcess, stageServiceConfig, startStageService } from '@diffmesh/runtime';
import { DenoisingStage } from './denoising-stage.js';

const config = loadServiceConfig(stageServiceConfig('dit-svc', 'DIFFMESH_DIT_'), process.argv.slice(2));
const log = createLogger({ name: 'dit-svc', ...config.log });
await runProcess('dit-svc', log, () =>
  startStageService({
    name: 'dit-svc',
    version: packageVersion(import.meta.url),
    config,
    log,
    createHandler: (deps) => new DenoisingStage({ ...deps, maxBatch: config.maxBatch }),
  }),
);
