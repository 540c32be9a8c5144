#!/usr/bin/env node
// vae-svc: the shared stage-service main with the VaeDecodingStage handler.
import { runStageServiceMain } from '@diffmesh/runtime';
import { VaeDecodingStage } from './vae-decoding-stage.js';

await runStageServiceMain({
  name: 'vae-svc',
  envPrefix: 'DIFFMESH_VAE_',
  moduleUrl: import.meta.url,
  createHandler: (deps) => new VaeDecodingStage(deps),
});
