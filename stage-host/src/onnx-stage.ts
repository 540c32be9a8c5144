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
} from '@diffmesh/core';
import type { ModelRunObserver } from './stage-metrics.js';
import type { ModelCatalog } from './model-catalog.js';
import type { ModelManifest } from './model-manifest.js';
import type { SessionCache } from './onnx-sessions.js';
import { stageComponents } from '@diffmesh/model-layout';
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
   * whole directory's check and the sessions of the components this stage runs.
   */
  async warm(model: string): Promise<void> {
    const m = await this.deps.catalog.resolve(model);
    if (m.kind === 'manifest') {
      await this.deps.sessions.get(m.manifest.file(this.modelFile));
      return;
    }
    for (const c of stageComponents(m.directory.layout, this.stage)) await m.directory.session(this.deps.sessions, c);
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
