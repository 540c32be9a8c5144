#!/usr/bin/env node
// dit-svc: the shared stage-service main with the DenoisingStage handler.
import { runStageServiceMain } from '@diffmesh/stage-host';
import { DenoisingStage } from './denoising-stage.js';
import { DenoiserAdapters } from './denoiser-adapters.js';

await runStageServiceMain({
  name: 'dit-svc',
  envPrefix: 'DIFFMESH_DIT_',
  moduleUrl: import.meta.url,
  createHandler: (deps, config) =>
    new DenoisingStage({
      ...deps,
      maxBatch: config.maxBatch,
      checkpointEvery: config.checkpointEvery,
      // One denoiser run per runner thread at once: runs of the same shape overlap.
      runConcurrency: Math.max(1, config.runnerThreads),
      ...(config.loraDir
        ? {
            adapters: new DenoiserAdapters({
              dir: config.loraDir,
              cacheBytes: config.loraCacheBytes,
              maxFileBytes: config.loraMaxFileBytes,
              ...(deps.metrics?.adapterLookup ? { onLookup: (outcome: 'hit' | 'load') => deps.metrics?.adapterLookup?.(outcome) } : {}),
            }),
          }
        : {}),
    }),
});
