#!/usr/bin/env node
// dit-svc: the shared stage-service main with the DenoisingStage handler.
import { runStageServiceMain } from '@diffmesh/stage-host';
import { DenoisingStage } from './denoising-stage.js';
import { DenoiserAdapters } from './denoiser-adapters.js';

await runStageServiceMain({
  name: 'dit-svc',
  envPrefix: 'DIFFMESH_DIT_',
  moduleUrl: import.meta.url,
  createHandler: (deps, config) => {
    const stage = new DenoisingStage({
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
    });
    const counts = deps.metrics?.adapterCounts?.bind(deps.metrics);
    if (counts) {
      stage.onAdaptersChange(() => {
        const r = stage.adapters();
        if (r) counts(r.held.length, r.available.length);
      });
    }
    return stage;
  },
});
