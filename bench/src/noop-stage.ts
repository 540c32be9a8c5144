#!/usr/bin/env node
// A stage service whose stage does nothing: measures the mesh's own overhead.
// Usage: node bench/dist/noop-stage.js --stage denoising --pool noop-dit --nats URL --models-dirs /tmp
import {
  STAGE_NAMES,
  createLogger,
  loadServiceConfig,
  packageVersion,
  runProcess,
  type StageHandler,
  type StageName,
} from '@diffmesh/core';
import { stageServiceConfig, startStageService } from '@diffmesh/stage-host';

const argv = process.argv.slice(2);
const at = argv.indexOf('--stage');
const stage = (at >= 0 ? argv[at + 1] : 'denoising') as StageName;
if (!(STAGE_NAMES as readonly string[]).includes(stage)) {
  process.stderr.write(`noop-stage: --stage must be one of ${STAGE_NAMES.join(', ')}\n`);
  process.exit(2);
}
if (at >= 0) argv.splice(at, 2);

class NoopStage implements StageHandler {
  readonly stage = stage;
  models(): string[] {
    return [];
  }
  async execute(): Promise<{ outputs: Record<string, never> }> {
    return { outputs: {} };
  }
}

const config = loadServiceConfig(stageServiceConfig('noop-stage', 'DIFFMESH_NOOP_'), argv);
const log = createLogger({ name: 'noop-stage', ...config.log });
await runProcess('noop-stage', log, () =>
  startStageService({ name: 'noop-stage', version: packageVersion(import.meta.url), config, log, createHandler: () => new NoopStage() }),
);
