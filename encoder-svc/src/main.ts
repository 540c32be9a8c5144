#!/usr/bin/env node
// encoder-svc: the shared stage-service main with the TextEncodingStage handler.
import { runStageServiceMain } from '@diffmesh/runtime';
import { TextEncodingStage } from './text-encoding-stage.js';

await runStageServiceMain({
  name: 'encoder-svc',
  envPrefix: 'DIFFMESH_ENCODER_',
  moduleUrl: import.meta.url,
  createHandler: (deps) => new TextEncodingStage(deps),
});
