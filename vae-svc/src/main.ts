#!/usr/bin/env node
// vae-svc: config → stage handler → gRPC StageService → NATS registration → signal handling.
import { createLogger, loadServiceConfig, packageVersion, runProcess, stageServiceConfig, startStageService } from '@diffmesh/runtime';
import { VaeDecodingStage } from './vae-decoding-stage.js';

const config = loadServiceConfig(stageServiceConfig('vae-svc', 'DIFFMESH_VAE_'), process.argv.slice(2));
const log = createLogger({ name: 'vae-svc', ...config.log });
await runProcess('vae-svc', log, () =>
  startStageService({
    name: 'vae-svc',
    version: packageVersion(import.meta.url),
    config,
    log,
    createHandler: (deps) => new VaeDecodingStage({ ...deps }),
  }),
);
