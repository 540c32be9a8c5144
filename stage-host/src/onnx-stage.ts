import {
  type StageName,
  ATTR,
  SPAN,
  withSpan,
  type Attributes,
  type StageContext,
  type StageHandler,
  type StageResult,
  type StageTask,
  type Logger,
} from '@diffmesh/core';
import type { ModelRunObserver } from './stage-metrics.js';
import type { ModelCatalog, ResolvedModel } from './model-catalog.js';
import type { ModelManifest } from './model-manifest.js';
import type { LoadedModelDirectory } from './loaded-model-directory.js';
import type { ModelSession, SessionCache, SessionVariant } from './onnx-sessions.js';
import { runOnZeros } from './warm-up.js';
import { stageComponents, type OnnxComponentName } from '@diffmesh/model-layout';
import type { TensorStore } from '@diffmesh/tensor-client';

/** What every ONNX-backed stage needs. */
export interface OnnxStageDeps {
  catalog: ModelCatalog;
  sessions: SessionCache;
  store: TensorStore;
  /** Models this instance serves; empty = every model in the catalog. */
  models: string[];
  /** Observes model run times (and denoiser batch sizes); absent = not measured. */
  metrics?: ModelRunObserver;
  /** Where warm-up runs are reported; absent = silent. */
  log?: Logger;
}

/** Base of the stages that run one of a model's ONNX files. */
export abstract class OnnxStage implements StageHandler {
  abstract readonly stage: StageName;
  /** The manifest file this stage runs. */
  protected abstract readonly modelFile: keyof ModelManifest['files'];

  constructor(protected readonly deps: OnnxStageDeps) {}

  models(): string[] {
    return this.deps.models;
  }

  /**
   * Loads the model ahead of the first task: the manifest's file, or for a model directory the
   * whole directory's check and the sessions of the components this stage runs. With `run`,
   * runs each once on zeros at the model's default size ({@link warmDims}), so a GPU compiles
   * its shaders now rather than in the first request; a graph it cannot size is left cold
   * (logged).
   */
  async warm(model: string, opts: { run?: boolean } = {}): Promise<void> {
    const m = await this.deps.catalog.resolve(model);
    const sessions: ModelSession[] = [];
    if (m.kind === 'manifest') {
      // A denoiser's graph gets the pool's rewrites (fused kernels, 4-bit weights).
      sessions.push(await this.deps.sessions.get(m.manifest.file(this.modelFile), { rewrite: this.modelFile === 'denoiser' }));
    } else {
      for (const c of stageComponents(m.directory.layout, this.stage)) {
        sessions.push(await m.directory.session(this.deps.sessions, c, this.sessionVariant(m.directory, c)));
      }
    }
    if (!opts.run) return;
    const dims = this.warmDims(m);
    for (const session of sessions) {
      const started = performance.now();
      const skipped = await runOnZeros(session, dims);
      const log = this.deps.log;
      if (skipped) log?.info({ model, file: session.file, why: skipped }, 'warm-up run skipped');
      else
        log?.info(
          { model, file: session.file, provider: session.provider, ms: Math.round(performance.now() - started) },
          'warm-up run done',
        );
    }
  }

  /**
   * The variant of a directory component's graph that this stage runs (a LoRA-branched text
   * encoder, say), so that warming loads the session tasks use. Default none: the file's own.
   */
  protected sessionVariant(_directory: LoadedModelDirectory, _component: OnnxComponentName): SessionVariant | undefined {
    return undefined;
  }

  /**
   * Sizes of the symbolic dimensions of this stage's graphs at the model's default size (and
   * `batch`: the batch of a typical run), for the warm-up run. Default: batch 1 only.
   */
  protected warmDims(_model: ResolvedModel): Record<string, number> {
    return { batch: 1 };
  }

  abstract execute(task: StageTask, ctx: StageContext): Promise<StageResult>;

  /**
   * Runs one model run in a `diffmesh.model.run` span (with the stage and `attributes`, e.g.
   * the batch size) and reports its duration to `diffmesh_model_run_seconds`.
   */
  protected runModel<T>(attributes: Attributes, run: () => Promise<T>): Promise<T> {
    return withSpan(SPAN.modelRun, { [ATTR.stage]: this.stage, ...attributes }, async () => {
      const started = performance.now();
      try {
        return await run();
      } finally {
        this.deps.metrics?.modelRun((performance.now() - started) / 1000);
      }
    });
  }
}
