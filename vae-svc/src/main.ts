#!/usr/bin/env node
// vae-svc: the shared stage-service main with the VaeDecodingStage handler (`--stage
// vae_decoding`, the default), or the ImageEncodingStage (`--stage image_encoding`).
import { runStageServiceMain, servedStage } from '@diffmesh/stage-host';
import { ImageEncodingStage } from './image-encoding-stage.js';
import { VaeDecodingStage } from './vae-decoding-stage.js';

await runStageServiceMain({
  name: 'vae-svc',
  envPrefix: 'DIFFMESH_VAE_',
  moduleUrl: import.meta.url,
  createHandler: (deps, config) =>
    servedStage(config.stage, ['vae_decoding', 'image_encoding'] as const) === 'image_encoding'
      ? new ImageEncodingStage(deps)
      : new VaeDecodingStage(deps),
});
