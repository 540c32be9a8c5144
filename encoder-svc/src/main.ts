#!/usr/bin/env node
// encoder-svc: the shared stage-service main with the TextEncodingStage handler
// (`--stage text_encoding`, the default, or `text_encoding_2`).
import { runStageServiceMain, servedStage } from '@diffmesh/stage-host';
import { TextEncoderAdapters } from './text-encoder-adapters.js';
import { TextEncodingStage } from './text-encoding-stage.js';

await runStageServiceMain({
  name: 'encoder-svc',
  envPrefix: 'DIFFMESH_ENCODER_',
  moduleUrl: import.meta.url,
  createHandler: (deps, config) =>
    new TextEncodingStage({
      ...deps,
      stage: servedStage(config.stage, ['text_encoding', 'text_encoding_2'] as const),
      ...(config.loraDir
        ? {
            adapters: new TextEncoderAdapters({
              dir: config.loraDir,
              cacheBytes: config.loraCacheBytes,
              maxFileBytes: config.loraMaxFileBytes,
              ...(deps.log ? { log: deps.log } : {}),
            }),
          }
        : {}),
    }),
});
