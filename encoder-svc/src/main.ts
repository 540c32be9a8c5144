#!/usr/bin/env node
// encoder-svc: config → stage handler → gRPC StageService → NATS registration → signal handling.
import { createLogger, loadServiceConfig, packageVersion, runProcess, stageServiceConfig, startStageService } from '@diffmesh/runtime';
import { TextEncodingStage } from './text-encoding-stage.js';

const config = loadServiceConfig(stageServiceConfig('encoder-svc', 'DIFFMESH_ENCODER_'), process.argv.slice(2));
const log = createLogger({ name: 'encoder-svc', ...config.log });
await runProcess('encoder-svc', log, () =>
  startStageService({
    name: 'encoder-svc',
    version: packageVersion(import.meta.url),
    config,
    log,
    createHandler: (deps) => new TextEncodingStage({ ...deps }),
  }),
);
